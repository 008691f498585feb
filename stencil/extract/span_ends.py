"""Where a string value ends: the model's own odds of closing it at a natural end.

A model asked for a field often copies past the value's end: `Porto, Portugal` for a city, a
degree with its university after `, `, a certificate with its year in ` (2016)`. Grounding lets
the string close at every span end, and there the model gives closing a real share, but
greedy decoding takes the larger (Qwen2.5-Coder-1.5B: P(close) 0.30 against 0.70 for the `,`
of `Porto, Portugal`, 0.19 / 0.81 for `Toronto, ON`, 0.12 / 0.88 for the ` (` of a
certificate's year), while where the value goes on inside a word run the close is near 0. At a
separator (the document going on with `, ` ` (` ` – ` `: ` a line end ...) the value ends when
the model's probability of closing the string is at least ``CLOSE_RATIO`` times that of the
separator it wrote.

A field's question is a one-key object (``{"city": "..."}``), so what follows a closed string
is only ``}``: the answer closed at position i is the answer's text up to i and ``"}``, the
same answer the model would have written had it closed there. Only a top-level string's answer
is cut (an array item's end changes what comes after it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

CLOSE_RATIO = 0.1
"""Close at a separator when P(close) >= CLOSE_RATIO * P(the separator's token)."""
TOP_LOGPROBS = 8
"""Alternatives asked per position (the constraint's mask leaves the close among them when
it is likely)."""
_SEPARATOR = re.compile(r"\s*[,;:(\[|–—·•]|\s+-(?:\s|$)|\s*\n")
"""A token that starts with one: the value's text goes on past a natural end (not `/`, which
joins the parts of a path, a DOI or `Verkäuferin / Verkäufer`)."""


def is_top_string(sub: dict[str, Any]) -> bool:
    """Whether a field's answer may be cut: a plain string (or null), without an ``enum``,
    ``const``, ``format``, ``pattern`` or ``minLength`` that a shorter value could break."""
    kind = sub.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    bound = {"enum", "const", "format", "pattern", "minLength"} & sub.keys()
    return "string" in kinds and set(kinds) <= {"string", "null"} and not bound


def close_at_separator(
    key: str,
    token_ids: Sequence[int],
    logprobs: Sequence[Any] | None,
    decode: Callable[[Sequence[int]], str],
    ratio: float = CLOSE_RATIO,
) -> str | None:
    """The answer closed at its first separator where the model's odds of closing its string
    are at least ``ratio`` of those of writing the separator; None where there is none.
    ``logprobs``: per output token, ``.chosen`` and ``.top`` (``Logprob``s under the mask);
    ``decode``: token ids -> text."""
    if not logprobs:
        return None
    opening = re.compile(r"\s*\{\s*" + re.escape(json.dumps(key)) + r'\s*:\s*"')
    whole = decode(token_ids)
    for at, position in zip(_sampled_at(token_ids, logprobs), logprobs, strict=False):
        chosen = position.chosen
        if not _SEPARATOR.match(chosen.token) or chosen.token.startswith('"'):
            continue
        close = sum(math.exp(t.logprob) for t in position.top if t.token.startswith('"'))
        if close < ratio * math.exp(chosen.logprob):
            continue
        head = decode(token_ids[:at])
        opened = opening.match(head)
        if opened is None or opened.end() == len(head) or not whole.startswith(head):
            continue
        if not whole[len(head) :].startswith(chosen.token):
            continue
        answer = head + '"}'
        try:
            value = json.loads(answer)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get(key), str) and value[key].strip():
            return answer
    return None


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
