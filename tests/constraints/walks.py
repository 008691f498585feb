"""Seeded random token walks through a compiled constraint's masks that may end in the
matcher's error state (a decode-time check left no continuation): the outcome is reported,
never an invalid completed output."""

from __future__ import annotations

import random
from dataclasses import dataclass

from constraint_helpers import _token_lengths

from stencil.constraints import CompiledConstraint, allocate_token_bitmask, bitmask_to_bool


@dataclass
class Walk:
    text: bytes
    outcome: str  # "done" (EOS accepted), "error" (no continuation), "length"
    error: str | None = None


def walk(compiled: CompiledConstraint, rng: random.Random, max_tokens: int = 120) -> Walk:
    """Temperature-1.0-like walk: uniform over allowed tokens, short ones preferred (so walks
    finish); every allowed token must be accepted and every refused one stays refused."""
    vocab = compiled.vocab
    matcher = compiled.new_matcher()
    short_ok = _token_lengths(vocab) <= 2
    eos = set(vocab.eos_token_ids)
    mask = allocate_token_bitmask(1, vocab.vocab_size)
    out: list[int] = []
    for _ in range(max_tokens):
        matcher.fill_next_token_bitmask(mask, 0)
        bits = bitmask_to_bool(mask, vocab.vocab_size)[0]
        if not bits.any():
            assert matcher.error(), "an empty mask needs an error message"
            assert not matcher.accept_token(next(iter(eos)))
            return Walk(vocab.decode_bytes(out), "error", matcher.error())
        short = (bits & short_ok).nonzero().flatten()
        pool = short if len(short) and rng.random() < 0.8 else bits.nonzero().flatten()
        token = int(pool[rng.randrange(len(pool))])
        eos_allowed = [t for t in eos if bits[t]]
        if eos_allowed and rng.random() < 0.3:
            token = eos_allowed[0]
        assert matcher.accept_token(token), f"mask allowed {token} but matcher rejected it"
        if token in eos:
            return Walk(vocab.decode_bytes(out), "done")
        out.append(token)
    return Walk(vocab.decode_bytes(out), "length")
