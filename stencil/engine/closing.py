"""``close_on_length``: when a constrained sequence is about to run out of ``max_tokens``, finish
its structure validly instead of stopping mid-structure.

Near the end of the budget, a depth-first search over a small set of "closing" tokens, tried in
preference order (quotes and brackets, then their common merges like ``",``, empty ``{}``/``[]``,
separators, a digit, a letter, ..., whitespace last) and following forced tokens (a required key),
finds a short token
path that makes the matcher accepting. The model goes on as long as such a path still fits; the
step after which none fits (say, a token that opens an object with required keys, or one that
runs into the budget mid-structure) is undone and the path that fitted before it is appended
instead (like jump-forward tokens). So an output that fits the budget is kept as it is, unless
the search's path (over single closing tokens, so at times longer than the model's own) stops
fitting before the model's does; one that does not fit ends in a short valid close.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stencil.engine.sequence import SequenceStatus

CLOSERS = (
    '"',
    "}",
    "]",
    ")",
    '",',
    '"}',
    '":',
    "},",
    "}]",
    '"]',
    "]}",
    "{}",
    "[]",
    ",",
    ":",
    "a",
    "0",
    "null",
    "true",
    "1",
    "e",
    ".",
    "-",
    " ",
    "\n",
)
WINDOW = 32  # start searching when this many tokens (more the deeper the structure) are left
PROBE_EVERY = 8  # before the window, measure the closing path this often (in tokens)
NODE_BUDGET = 400  # matcher probes per search, so a hopeless state costs little
LOOPS = 4  # self-loops in a row the first pass allows
FALLBACK = 6  # allowed tokens (lowest ids: single bytes first) tried when no closer fits


def closer_token_ids(tokenizer) -> list[int]:
    """Single-token encodings of CLOSERS, in preference order."""
    ids = []
    for text in CLOSERS:
        enc = tokenizer.encode(text, add_special_tokens=False)
        if len(enc) == 1 and enc[0] not in ids:
            ids.append(enc[0])
    return ids


def grammar_token_ids(constraint) -> list[int]:
    """The token ids a grammar constraint names as tokens (``<[id]>``), in order of mention."""
    if constraint is None or constraint.kind != "grammar" or "<[" not in constraint.source:
        return []
    return list(dict.fromkeys(int(m) for m in re.findall(r"<\[(\d+)\]>", constraint.source)))


@dataclass(slots=True)
class CloseSearch:
    """What the search needs from the engine: preferred closing tokens, the tokenizer's encode
    (for forced text) and ``allowed(matcher) -> token ids`` (the mask, as a fallback when no
    preferred token fits, e.g. the first letter of an enum value)."""

    candidates: list[int]
    encode: object
    allowed: object
    signature: object = None  # matcher -> bytes: the allowed-token mask, to skip self-loops


def shortest_close(matcher, search: CloseSearch, limit: int) -> list[int] | None:
    """A short token path (<= ``limit``) after which ``matcher`` accepts; the matcher is left as
    it was. None when none is found within the probe budget.

    A self-loop is a token after which the same tokens are allowed (a letter inside a string,
    ``[a-z]+``): depth-first, a run of them uses the whole budget before the token that makes
    progress is tried. So the first pass allows at most LOOPS self-loops in a row (a date's year
    takes four), and a last pass any (nesting, or a repetition the mask does not tell apart from
    a loop: the mask is not the state). CLOSERS try a letter before a digit: a special-use email
    domain (``acme.test``) or one ending in a digit must grow by a letter before it can close."""
    for loops in (LOOPS, None) if search.signature is not None else (None,):
        path = _search(matcher, search, limit, [NODE_BUDGET], loops, 0)
        if path is not None:
            return path
    return None


def _search(
    matcher, search: CloseSearch, depth: int, budget: list[int], loops: int | None, run: int
) -> list[int] | None:
    """Depth-first below ``matcher``'s state; ``run`` self-loops in a row lead here."""
    if matcher.is_accepting() or matcher.is_terminated():
        return []
    if depth == 0:
        return None
    forced = _forced(matcher, search.encode)  # e.g. a required key: follow it as one move
    if forced:
        rest = (
            _search(matcher, search, depth - len(forced), budget, loops, 0)
            if len(forced) <= depth
            else None
        )
        matcher.rollback(len(forced))
        return None if rest is None else [*forced, *rest]
    here = search.signature(matcher) if loops is not None else None
    tried = set()
    for tokens in (search.candidates, lambda: search.allowed(matcher)[:FALLBACK]):
        for token in tokens() if callable(tokens) else tokens:
            if budget[0] <= 0:
                return None
            if token in tried or not matcher.accept_token(token):
                continue
            tried.add(token)
            budget[0] -= 1
            loop = here is not None and not matcher.is_accepting()
            loop = loop and search.signature(matcher) == here
            if loop and run >= loops:
                matcher.rollback(1)
                continue
            rest = _search(matcher, search, depth - 1, budget, loops, run + 1 if loop else 0)
            matcher.rollback(1)
            if rest is not None:
                return [token, *rest]
    return None


def _forced(matcher, encode) -> list[int]:
    """Accept and return the forced continuation: the matcher's forced tokens, or else the
    forced text tokenized (the matcher stops short of text whose tokens could still merge)."""
    forced = matcher.jump_forward_tokens()
    if not forced and (text := matcher.find_jump_forward_string()):
        forced = encode(text)
    accepted = 0
    for t in forced:
        if not matcher.accept_token(t):
            matcher.rollback(accepted)
            return []
        accepted += 1
    return forced


def in_window(seq, search: CloseSearch) -> bool:
    """Whether the close search runs this step: within WINDOW tokens of the budget, or earlier
    by the length of the closing path (a structure nested deeper than WINDOW needs more tokens
    to close than the window holds). The path is measured every PROBE_EVERY tokens before the
    window, so it grows by at most that many tokens' worth of openings before the next probe."""
    left = seq.max_len - seq.num_tokens
    if left <= WINDOW + seq.close_need:
        return True
    if seq.num_tokens >= seq.close_probe_at:
        seq.close_probe_at = seq.num_tokens + PROBE_EVERY
        path = shortest_close(seq.matcher, search, left - WINDOW)
        # None after a path was found: the path outgrew the room left, close from now on. None
        # with no path found before (the probe budget ran out, or text the search cannot write
        # is still to come, such as an email's domain) says nothing: keep the plain window.
        if path is not None:
            seq.close_need = len(path)
        elif seq.close_need:
            seq.close_need = left
    return left <= WINDOW + seq.close_need


@dataclass(slots=True)
class Snapshot:
    """A sequence's output state before a step's tokens, so they can be undone (their KV is not
    computed yet, so only Python-side state changes)."""

    num_tokens: int
    text: str
    prefix_offset: int
    read_offset: int
    matcher_tokens: int
    num_logprobs: int
    cumulative_logprob: float

    @classmethod
    def take(cls, seq) -> Snapshot:
        return cls(
            seq.num_tokens,
            seq.text,
            seq.prefix_offset,
            seq.read_offset,
            seq.matcher.num_tokens,
            len(seq.logprobs or ()),
            seq.cumulative_logprob,
        )

    def restore(self, seq) -> None:
        seq.status, seq.finish_reason = SequenceStatus.RUNNING, None  # it was running then
        seq.matcher.rollback(seq.matcher.num_tokens - self.matcher_tokens)
        del seq.token_ids[self.num_tokens :]
        seq.text, seq.prefix_offset, seq.read_offset = (
            self.text,
            self.prefix_offset,
            self.read_offset,
        )
        if seq.logprobs is not None:
            del seq.logprobs[self.num_logprobs :]
        seq.cumulative_logprob = self.cumulative_logprob
