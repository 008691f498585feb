"""Error text echoed to clients: no object reprs or addresses, no control characters or lone
surrogates, user input truncated.

Every error body the server sends (``APIError.body()``, SSE error events, the middlewares'
rejections) passes through :func:`sanitize_message`, so a message that quotes a 1 MB regex or
a model name with a lone surrogate stays short and always encodes as UTF-8.
"""

from __future__ import annotations

import re

MAX_MESSAGE_CHARS = 512  # the whole message
MAX_TOKEN_CHARS = 80  # one whitespace-free run (a quoted regex, a model name, a token id list)

_OBJECT_REPR = re.compile(r"<([A-Za-z_][\w.]*)(?: [^<>]{0,200}?)? at 0x[0-9A-Fa-f]+>")
_ADDRESS = re.compile(r"\b0x[0-9A-Fa-f]{6,}\b")
_LONG_RUN = re.compile(rf"\S{{{MAX_TOKEN_CHARS + 1},}}")
_SPACES = re.compile(r"[ \t]{4,}")


def sanitize_message(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A client-safe version of ``text``: printable, UTF-8-encodable, at most ``limit`` chars."""
    out = str(text)
    if len(out) > 8 * limit:  # bound the regex work below on pathological inputs
        out = out[: 8 * limit]
    out = _OBJECT_REPR.sub(lambda m: f"<{m.group(1).rsplit('.', 1)[-1]}>", out)
    out = _ADDRESS.sub("0x…", out)
    out = "".join(_clean_char(ch) for ch in out)
    out = _LONG_RUN.sub(_shorten, out)
    out = _SPACES.sub("   ", out)
    if len(out) > limit:
        out = out[: limit - 1].rstrip() + "…"
    return out


def _clean_char(ch: str) -> str:
    if "\ud800" <= ch <= "\udfff":  # a lone surrogate cannot be encoded as UTF-8
        return "\ufffd"
    if ch in "\n\t" or ch.isprintable():
        return ch
    return " "


def _shorten(m: re.Match[str]) -> str:
    run = m.group(0)
    return f"{run[: MAX_TOKEN_CHARS - 20]}…(+{len(run) - (MAX_TOKEN_CHARS - 20)} chars)"


def is_sanitized(text: str, limit: int = MAX_MESSAGE_CHARS) -> bool:
    """What a test asserts about an error message it received."""
    return (
        len(text) <= limit
        and not _OBJECT_REPR.search(text)
        and not _ADDRESS.search(text)
        and not _LONG_RUN.search(text)
        and "Traceback" not in text
        and all(_clean_char(ch) == ch for ch in text)
    )
