"""A field question's answer reread by the model's odds, the same way for every backend: a
string closed at a separator where closing is near (``span_ends``).

The in-process engine hands over token ids, per-position logprobs and its tokenizer's decode;
an OpenAI-compatible server (``--server``) hands over ``choice.logprobs.content``, per position
the token's text, bytes, logprob and top alternatives, and no ids: ``api_tokens`` turns those
into the same three, the position's index standing for its token id, so both backends call
``reread`` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stencil.engine.outputs import Logprob, PositionLogprobs
from stencil.extract.span_ends import close_at_separator, is_top_string


def cuttable(schema: dict[str, Any]) -> bool:
    """Whether a field question's answer is a top-level string ``span_ends`` may close early
    (its question asks for logprobs)."""
    props = schema.get("properties") or {}
    return len(props) == 1 and all(isinstance(v, dict) and is_top_string(v) for v in props.values())


def reread(
    key: str,
    schema: dict[str, Any],
    text: str,
    token_ids: Sequence[int],
    logprobs: Sequence[PositionLogprobs] | None,
    decode: Callable[[Sequence[int]], str],
) -> str:
    """The answer ``text`` to field ``key`` (its question's answer ``schema``) as the model's
    odds read it: the string closed at a separator, else as it is (also where ``logprobs`` is
    empty or None)."""
    if not logprobs or not cuttable(schema):
        return text
    return close_at_separator(key, token_ids, logprobs, decode) or text


def api_tokens(
    content: str, entries: Sequence[Any] | None
) -> tuple[list[int], list[PositionLogprobs], Callable[[Sequence[int]], str]] | None:
    """``(token ids, logprobs, decode)`` for ``reread`` from an OpenAI chat answer's
    ``content`` and its ``logprobs.content`` ``entries`` (objects or dicts with ``token``,
    ``logprob``, ``bytes``, ``top_logprobs``): the ids are the positions, ``decode`` joins
    their texts. The texts are the entries' ``bytes`` where those join to ``content`` as UTF-8
    (a token that ends inside a character), else their ``token``s where those do; a last entry
    beyond ``content`` (a stop token) is left out. None where neither joins to ``content``
    (a server that leaves tokens out: nothing to read the odds along)."""
    if not entries:
        return None
    entries = [e if isinstance(e, dict) else e.model_dump() for e in entries]
    for n in (len(entries), len(entries) - 1):
        kept = entries[:n]
        pieces = _pieces(kept, content)
        if pieces is None:
            continue
        positions = [
            PositionLogprobs(
                Logprob(i, pieces[i].decode("utf-8", errors="replace"), e["logprob"]),
                [Logprob(-1, t["token"], t["logprob"]) for t in e.get("top_logprobs") or ()],
            )
            for i, e in enumerate(kept)
        ]

        def decode(ids: Sequence[int], pieces: list[bytes] = pieces) -> str:
            return b"".join(pieces[i] for i in ids).decode("utf-8", errors="replace")

        return list(range(n)), positions, decode
    return None


def _pieces(entries: list[dict[str, Any]], content: str) -> list[bytes] | None:
    """Each entry's bytes, where they (else its token texts) join to ``content``."""
    raw = [e.get("bytes") for e in entries]
    if all(b is not None for b in raw):
        pieces = [bytes(b) for b in raw]
        if b"".join(pieces) == content.encode("utf-8"):
            return pieces
    texts = [e.get("token") or "" for e in entries]
    if "".join(texts) == content:
        return [t.encode("utf-8") for t in texts]
    return None
