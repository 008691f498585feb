"""A field question's answer reread by the model's odds, the same way for every backend: a
string closed at a separator where closing is near (``span_ends``); an optional number or date
the model did not want left out (``unwanted``: by its raw logprobs, which the in-process engine
gives, before the constraint's mask).

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
from stencil.extract.span_ends import close_at_separators, has_cut_strings

UNWANTED = -3.0
"""A number's or date's digit the model gave less than e^-3 (5%) before the mask is one the
constraint pushed on it: what it wanted is no value the document states (an hourly wage for a
yearly salary, ``2`` rooms of a ``bilocale``, a due date 14 days after the invoice's), so the
field is not stated."""


def weighed_answer(schema: dict[str, Any]) -> bool:
    """Whether a field question's answer is an optional top-level number or date, left out
    where the model did not want it (its question asks raw logprobs: ``unwanted``)."""
    props = schema.get("properties") or {}
    return (
        len(props) == 1
        and not schema.get("required")
        and all(_numeric(v) or _date(v) for v in props.values())
    )


def _date(sub: Any) -> bool:
    return isinstance(sub, dict) and sub.get("format") == "date"


def _numeric(sub: Any) -> bool:
    kinds = sub.get("type") if isinstance(sub, dict) else None
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return bool({"number", "integer"} & set(kinds))


def unwanted(logprobs: Sequence[PositionLogprobs]) -> bool:
    """Whether a number or date answer holds a value token the model gave under ``UNWANTED`` (raw
    logprobs; a token the constraint forced has 0). Only tokens after the key's colon count:
    the answer's braces are the format's, not the model's reading."""
    text = ""
    for position in logprobs:
        token = position.chosen
        if ":" in text and any(c.isdigit() for c in token.token) and token.logprob < UNWANTED:
            return True
        text += token.token
    return False


def reread(
    key: str,
    schema: dict[str, Any],
    text: str,
    token_ids: Sequence[int],
    logprobs: Sequence[PositionLogprobs] | None,
    decode: Callable[[Sequence[int]], str],
) -> str:
    """The answer ``text`` to field ``key`` (its question's answer ``schema``) as the model's
    odds read it: its strings closed at a separator, an optional number the model did not want
    not stated (``{}``; ``logprobs`` raw there), else as it is (also where ``logprobs`` is
    empty or None)."""
    if logprobs and weighed_answer(schema):
        return "{}" if unwanted(logprobs) else text
    if not logprobs or not has_cut_strings(schema):
        return text
    return close_at_separators(schema, token_ids, logprobs, decode) or text


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
