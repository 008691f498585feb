"""Where a string value ends: the model's own odds of closing it at a natural end.

A model asked for a field often copies past the value's end: `Porto, Portugal` for a city, a
degree with its university after `, `, a certificate with its year in ` (2016)`, an employer
with its town (`Kaszub s.c., Kartuzy`). Grounding lets the string close at every span end,
and there the model gives closing a real share, but greedy decoding takes the larger
(Qwen2.5-Coder-1.5B: P(close) 0.30 against 0.70 for the `,` of `Porto, Portugal`, 0.19 / 0.81
for `Toronto, ON`, 0.12 / 0.88 for the ` (` of a certificate's year), while where the value
goes on inside a word run the close is near 0. At a separator (the document going on with
`, ` ` (` ` – ` `: ` a line end ...) the value ends when the model's probability of closing
the string is at least ``CLOSE_RATIO`` times that of the separator it wrote.

Only a string that is an object property's value is cut (a field's one-key answer
``{"city": "..."}``, a part of a list's object items ``{"employer": "..."}``): what follows
it is the object's next key or its end, whatever the string's length, so the answer cut
there is the one the model would have written had it closed. An item of a list of strings
is not cut: where it ends decides what the next item is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

CLOSE_RATIO = 0.1
"""Close at a separator when P(close) >= CLOSE_RATIO * P(the separator's token)."""
TOP_LOGPROBS = 8
"""Alternatives asked per position (the constraint's mask leaves the close among them when
it is likely)."""
_SEPARATOR = re.compile(r"\s*[,;:(\[|–—·•]|\s+-(?:\s|$)|\s*\n")
"""A token that starts with one: the value's text goes on past a natural end (not `/`, which
joins the parts of a path, a DOI or `Verkäuferin / Verkäufer`)."""
_ITEM = None
"""A path step into an array's items (a property name otherwise)."""


def is_plain_string(sub: Any) -> bool:
    """Whether a value may be cut: a plain string (or null), without an ``enum``, ``const``,
    ``format``, ``pattern`` or ``minLength`` that a shorter value could break."""
    if not isinstance(sub, dict):
        return False
    kind = sub.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    bound = {"enum", "const", "format", "pattern", "minLength"} & sub.keys()
    return "string" in kinds and set(kinds) <= {"string", "null"} and not bound


def has_cut_strings(schema: dict[str, Any]) -> bool:
    """Whether an answer schema has a plain string as an object property's value, the field's
    own or its (list items') parts: its question asks logprobs to cut it by."""
    for sub in (schema.get("properties") or {}).values():
        if not isinstance(sub, dict):
            continue
        if is_plain_string(sub) or has_cut_strings(sub) or has_cut_strings(sub.get("items") or {}):
            return True
    return False


def close_at_separators(
    schema: dict[str, Any],
    token_ids: Sequence[int],
    logprobs: Sequence[Any] | None,
    decode: Callable[[Sequence[int]], str],
    ratio: float = CLOSE_RATIO,
) -> str | None:
    """The answer with each plain string property value (by ``schema``, the answer's) closed
    at its first separator where the model's odds of closing it are at least ``ratio`` of
    those of writing the separator; None where none is. ``logprobs``: per output token,
    ``.chosen`` and ``.top`` (``Logprob``s under the mask); ``decode``: token ids -> text."""
    whole = decode(token_ids)
    try:
        json.loads(whole)
    except ValueError:
        return None
    strings = [
        (s, e) for s, e, path in _property_strings(whole) if is_plain_string(_at(schema, path))
    ]
    cuts: dict[tuple[int, int], int] = {}
    for at, position in zip(_sampled_at(token_ids, logprobs), logprobs, strict=False):
        chosen = position.chosen
        k = _separator_at(chosen.token)
        if k is None:
            continue
        closing = chosen.token[:k] + '"'  # the token's text before the separator, then a close
        close = sum(math.exp(t.logprob) for t in position.top if t.token.startswith(closing))
        if close < ratio * math.exp(chosen.logprob):
            continue
        head = decode(token_ids[:at])
        if not whole.startswith(head) or not whole[len(head) :].startswith(chosen.token):
            continue
        cut = len(head) + k
        span = next(((s, e) for s, e in strings if s < cut < e), None)
        if span is not None and span not in cuts and whole[span[0] : cut].strip():
            cuts[span] = cut
    answer = whole
    for (_, end), cut in sorted(cuts.items(), reverse=True):
        answer = answer[:cut] + answer[end:]
    try:
        json.loads(answer)
    except ValueError:
        return None
    return answer if answer != whole else None


def _separator_at(token: str) -> int | None:
    """Where a separator starts in a token's text (``, ``, and ``.,`` after ``s.r.o``: 1), None
    where none does or a quote comes first."""
    for k in range(len(token)):
        if token[k] == '"':
            return None
        if _SEPARATOR.match(token, k):
            return k
    return None


def _at(schema: Any, path: tuple[str | None, ...]) -> Any:
    """The subschema at a path of property names and ``_ITEM`` steps (None: not there)."""
    for step in path:
        if not isinstance(schema, dict):
            return None
        schema = (
            schema.get("items") if step is _ITEM else (schema.get("properties") or {}).get(step)
        )
    return schema


def _property_strings(text: str) -> Iterator[tuple[int, int, tuple[str | None, ...]]]:
    """``(start, end, path)`` of each string in a JSON text that is an object property's value:
    its characters ``text[start:end]`` (inside the quotes), its path of property names and
    ``_ITEM`` steps from the top."""
    stack: list[str | None] = []  # per open container: an object's key now, an array's _ITEM
    expect_key = False
    i = 0
    while i < len(text):
        c = text[i]
        in_object = bool(stack) and stack[-1] is not _ITEM
        if c == '"':
            end = _string_end(text, i + 1)
            if in_object and expect_key:
                stack[-1] = json.loads(text[i : end + 1])
                expect_key = False
            elif in_object:
                yield i + 1, end, tuple(stack)
            i = end + 1
            continue
        if c in "{[":
            stack.append(_ITEM if c == "[" else "")
            expect_key = c == "{"
        elif c in "}]":
            stack.pop()
        elif c == ",":
            expect_key = in_object
        i += 1


def _string_end(text: str, i: int) -> int:
    """The index of the quote closing the string whose characters start at ``i``."""
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i


def _sampled_at(token_ids: Sequence[int], logprobs: Sequence[Any]) -> list[int]:
    """The index in ``token_ids`` of each ``logprobs`` entry's token: the engine gives each
    jump-forward token (forced by the constraint) an entry of its own, but a path that closes
    the answer near ``max_tokens`` comes without, so the two lists may drift apart; each entry
    is matched to the next output token with its id."""
    out, p = [], 0
    for position in logprobs:
        while p < len(token_ids) and token_ids[p] != position.chosen.token_id:
            p += 1
        if p == len(token_ids):
            break
        out.append(p)
        p += 1
    return out
