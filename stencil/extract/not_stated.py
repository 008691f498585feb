"""Whether a field is stated at all: the model's own odds of answering "not stated".

A field's question lets the model answer ``{}`` (an optional field) or ``{"key": null}`` (a
nullable one) where the document does not state it. Asked about a field the document never
mentions, a small model still writes a value more often than not (a currency for a free event,
``false`` for pets never mentioned), yet it gives "not stated" a real share where the answers
part (``{`` then ``}`` rather than ``"``; ``{"key":`` then ``null``). Greedy decoding takes the
larger; here the field is left out where the model's probability of not stating it is at least
``ABSENT_ODDS`` times that of stating it.

The probability of "not stated" is summed along the written answer up to where it parted from
"not stated": at each position, the probability of the path so far times that of the
alternatives that say "not stated" (``{}`` at the first token, or ``{\\n`` then ``}``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from stencil.extract.questions import nullable
from stencil.extract.span_ends import sampled_at

ABSENT_ODDS = 0.5
"""Leave a field out where P(not stated) >= ABSENT_ODDS * P(stated)."""


def not_stated_answers(key: str, schema: dict[str, Any]) -> list[str]:
    """The answers that say "not stated" under a field question's answer ``schema`` (one-key
    object): ``{}`` where the key is optional, ``{"key": null}`` where its value may be null."""
    out = [] if key in schema.get("required", ()) else ["{}"]
    sub = (schema.get("properties") or {}).get(key)
    if isinstance(sub, dict) and nullable(sub):
        out.append(json.dumps({key: None}))
    return out


def not_stated_odds(
    key: str,
    schema: dict[str, Any],
    token_ids: Sequence[int],
    logprobs: Sequence[Any] | None,
    decode: Callable[[Sequence[int]], str],
) -> tuple[float, str] | None:
    """``(P(not stated) / P(stated), the not-stated answer)`` for an answer that states a
    value; None where it says "not stated" itself or nothing tells. ``logprobs``: per output
    token, ``.chosen`` and ``.top`` (``Logprob``s under the mask)."""
    marks = {_mark(_compact(a)): a for a in not_stated_answers(key, schema)}
    if not logprobs or not marks:
        return None
    absent, path, answer = 0.0, 1.0, None
    for at, position in zip(sampled_at(token_ids, logprobs), logprobs, strict=False):
        head = decode(token_ids[:at])
        for alt in position.top:
            text = _compact(head + alt.token)
            hit = next((m for m in marks if text.startswith(m)), None)
            if hit is not None:
                absent += path * math.exp(alt.logprob)
                answer = answer or marks[hit]
        chosen = _compact(head + position.chosen.token)
        if any(chosen.startswith(m) for m in marks):
            return None  # the answer says "not stated" itself
        if not any(m.startswith(chosen) for m in marks):  # parted from every "not stated"
            if answer is None:
                return 0.0, next(iter(marks.values()))
            return absent / max(1.0 - absent, 1e-9), answer
        path *= math.exp(position.chosen.logprob)
    return None


def leave_absent(
    key: str,
    schema: dict[str, Any],
    token_ids: Sequence[int],
    logprobs: Sequence[Any] | None,
    decode: Callable[[Sequence[int]], str],
    odds: float = ABSENT_ODDS,
) -> str | None:
    """The not-stated answer where the model's odds of it are at least ``odds``; else None."""
    found = not_stated_odds(key, schema, token_ids, logprobs, decode)
    return found[1] if found is not None and found[0] >= odds else None


def _compact(text: str) -> str:
    """``text`` without the whitespace JSON allows between tokens."""
    return re.sub(r"\s+", "", text)


def _mark(answer: str) -> str:
    """Where a compact not-stated answer parts from every answer that states a value: ``{}``,
    or ``{"key":n`` (only null starts with ``n``)."""
    return answer if answer == "{}" else answer[: answer.rindex(":") + 2]
