"""``close_on_length``: when a constrained sequence is about to run out of ``max_tokens``, finish
its structure validly instead of stopping mid-structure.

Near the end of the budget, a depth-first search over a small set of "closing" tokens, tried in
preference order (quotes and brackets, then their common merges like ``",``, separators, a digit,
a letter, ..., whitespace last) and following forced tokens (a required key), finds a short token
path that makes the matcher accepting. The model goes on as long as such a path still fits; the
step after which none fits (say, a token that opens an object with required keys, or one that
runs into the budget mid-structure) is undone and the path that fitted before it is appended
instead (like jump-forward tokens). So an output that fits the budget is kept as it is, unless
the search's path (over single closing tokens, so at times longer than the model's own) stops
fitting before the model's does; one that does not fit ends in a short valid close. The search
starts WINDOW tokens plus the closing path's length before the end: that length is measured
every few tokens on the way, since a deeply nested structure needs more than WINDOW to close.
"""

from __future__ import annotations

from dataclasses import dataclass

from stencil.engine.sequence import SequenceStatus

CLOSERS = ('"', "}", "]", ")", '",', '"}', '":', "},", "}]", '"]', "]}", ",", ":", "0", "a", "null",
           "true", "1", "e", ".", "-", " ", "\n")
WINDOW = 32  # start searching when this many tokens are left (plus the last measured close)
HORIZON = 512  # from this many tokens left, measure the closing path every PROBE_EVERY tokens:
PROBE_EVERY = 8  # a deep structure's close ("}]}]..." of a recursive tree) outgrows WINDOW
NODE_BUDGET = 400  # matcher probes per search, so a hopeless state costs little
FALLBACK = 6  # allowed tokens (lowest ids: single bytes first) tried when no closer fits


def closer_token_ids(tokenizer) -> list[int]:
    """Single-token encodings of CLOSERS, in preference order."""
    ids = []
    for text in CLOSERS:
        enc = tokenizer.encode(text, add_special_tokens=False)
        if len(enc) == 1 and enc[0] not in ids:
            ids.append(enc[0])
    return ids


@dataclass(slots=True)
class CloseSearch:
    """What the search needs from the engine: preferred closing tokens, the tokenizer's encode
    (for forced text) and ``allowed(matcher) -> token ids`` (the mask, as a fallback when no
    preferred token fits, e.g. the first letter of an enum value)."""

    candidates: list[int]
    encode: object
    allowed: object


def shortest_close(matcher, search: CloseSearch, limit: int) -> list[int] | None:
    """A short token path (<= ``limit``) after which ``matcher`` accepts; the matcher is left as
    it was. None when none is found within the probe budget."""
    return _search(matcher, search, limit, [NODE_BUDGET])


def _search(matcher, search: CloseSearch, depth: int, budget: list[int]) -> list[int] | None:
    if matcher.is_accepting() or matcher.is_terminated():
        return []
    if depth == 0:
        return None
    forced = _forced(matcher, search.encode)  # e.g. a required key: follow it as one move
    if forced:
        rest = _search(matcher, search, depth - len(forced), budget) if len(forced) <= depth else None
        matcher.rollback(len(forced))
        return None if rest is None else [*forced, *rest]
    tried = set()
    for tokens in (search.candidates, lambda: search.allowed(matcher)[:FALLBACK]):
        for token in tokens() if callable(tokens) else tokens:
            if budget[0] <= 0:
                return None
            if token in tried or not matcher.accept_token(token):
                continue
            tried.add(token)
            budget[0] -= 1
            rest = _search(matcher, search, depth - 1, budget)
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
        return cls(seq.num_tokens, seq.text, seq.prefix_offset, seq.read_offset,
                   seq.matcher.num_tokens, len(seq.logprobs or ()), seq.cumulative_logprob)

    def restore(self, seq) -> None:
        seq.status, seq.finish_reason = SequenceStatus.RUNNING, None  # it was running then
        seq.matcher.rollback(seq.matcher.num_tokens - self.matcher_tokens)
        del seq.token_ids[self.num_tokens :]
        seq.text, seq.prefix_offset, seq.read_offset = self.text, self.prefix_offset, self.read_offset
        if seq.logprobs is not None:
            del seq.logprobs[self.num_logprobs :]
        seq.cumulative_logprob = self.cumulative_logprob
