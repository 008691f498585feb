"""Lone surrogates: JSON may spell them (``"\\ud800"``) though no UTF-8 text can hold them, and the
tokenizer, the constraint compilers and the response encoder all fail on them. A request carrying
one is a 400 naming the field, found only when the raw body has a surrogate escape at all."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def lone_surrogate_path(raw: bytes, doc: Any) -> str | None:
    """The dotted path of the first string (or key) in ``doc`` holding a lone surrogate, or
    None. ``raw`` is the body ``doc`` was parsed from (a cheap pre-check)."""
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not _encodable(value):
                return path or "body"
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if not _encodable(key):
                    return path or "body"
                stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}" if path else str(i), item) for i, item in enumerate(value))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
