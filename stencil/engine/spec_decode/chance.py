"""How far to draft: each draft's chance of being what the model writes, by where it came from.

A draft row costs forward time whether or not it is accepted (~0.8 ms on the embedded model kept
quantized, 2 threads), and an accepted one saves a step (~3.4 ms more than a row): fitted to the
grounded set's step and row counts and times, docs/engine.md. So a proposed token pays where the
chance that it and every draft before it are accepted is above ~1 / (1 + STEP_ROWS)
(``MIN_CHANCE``). ``STEP_ROWS`` is the prior: the engine measures its model's own
(``step_cost.py``). A run of f forced tokens costs nothing when the drafts before it are right
(those rows are computed in the next step anyway) and f wasted rows when they are wrong, and it
buys the sampled token after it: it pays where the chain's chance is above f / (STEP_ROWS + f)
(``forced_run_pays``). ``STEP_ROWS`` 3 did best of 6.5, 4.2 and 3 by that cost on the grounded
set and free chat. The chances are acceptance rates measured on the grounded documents and the
chat answers of ``bench/engine/latency_bench.py`` (the proposal's first token given the drafts
before it were accepted, then each later one given the one before it; unconstrained drafts'
scaled by the request's own acceptance, ``drafter.own_trust``); a request's own proposer
(``proposer.py``) states the chances of its proposals."""

from __future__ import annotations

from dataclasses import dataclass

STEP_ROWS = 3.0  # what a step costs beyond its rows, in rows
MIN_CHANCE = 1 / (1 + STEP_ROWS)
FORCED_TEXT = 0.85  # forced text drafted as its own tokenization (the model may split it)

# token n-gram lookups, by the n of the suffix found: (first token, each later one)
_NGRAM_FREE = {1: (0.15, 0.5), 2: (0.4, 0.75), 3: (0.65, 0.8)}  # unconstrained text
_NGRAM_GUIDED = {1: (0.5, 0.8), 2: (0.7, 0.85), 3: (0.7, 0.85)}  # under a constraint
_NGRAM_LONG = {False: (0.88, 0.93), True: (0.75, 0.95)}  # n >= 4
TEXT = (0.8, 0.9)  # the lookup on text
KEY = (0.95, 1.0)  # the next declared key, right after its opening quote
KEY_AFTER_VALUE = (0.5, 0.95)  # the value closed, then the next key


@dataclass(frozen=True, slots=True)
class Guess:
    """A proposal: its tokens, the chance its first token is right (given the drafts before
    it), and the chance of each later token given the one before it."""

    tokens: list[int]
    first: float
    rest: float


def ngram_chance(n: int, guided: bool) -> tuple[float, float]:
    """(first, rest) for a token n-gram proposal found by a suffix of ``n`` tokens."""
    if n >= 4:
        return _NGRAM_LONG[guided]
    return (_NGRAM_GUIDED if guided else _NGRAM_FREE).get(n, _NGRAM_LONG[guided])


def forced_run_pays(chance: float, length: int, step_rows: float = STEP_ROWS) -> bool:
    """Whether ``length`` forced tokens after drafts whose chain's chance is ``chance`` pay
    (``step_rows``: what a step costs beyond its rows, ``step_cost.py``)."""
    return chance * (step_rows + length) >= length
