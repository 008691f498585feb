"""Matcher rollback as the drafter uses it: after drafts are accepted (proposals and forced
tokens) and rolled back, the matcher is where it was: the same mask, the same accepting state,
the same token count, at every point of random walks through each kind of constraint."""

from __future__ import annotations

import random

import pytest
import torch

from stencil.constraints import (
    Constraint,
    ConstraintCompiler,
    TokenVocab,
    allocate_token_bitmask,
    bitmask_to_bool,
)
from stencil.engine.sampling_params import SamplingParams
from stencil.engine.sequence import Sequence
from stencil.engine.spec_decode.config import SpeculativeConfig
from stencil.engine.spec_decode.drafter import Drafter

DOC = "Maria Lopez (maria@acme.example) paid 1250.00 on 2024-03-05 to Acme Tools Ltd."
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string", "format": "email"},
        "amount": {"type": "number"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    },
    "required": ["name", "email", "amount", "tags"],
}
CONSTRAINTS = [
    Constraint.json_schema(SCHEMA),  # uniqueItems: the checked matcher
    Constraint.json_schema(SCHEMA, source_text=DOC, ground_strings=True, ground_numbers=True),
    Constraint.regex(r"[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,3}"),
    Constraint.grammar('start: pair ("," pair)*\npair: /[a-z]{1,5}/ "=" /[0-9]{1,3}/'),
]


@pytest.fixture(scope="module")
def compiler(tokenizer):
    vocab = TokenVocab.from_hf(tokenizer, vocab_size=49152, eos_token_ids=[2])
    return ConstraintCompiler(vocab, workers=0)


def _state(matcher) -> tuple:
    bitmask = allocate_token_bitmask(1, 49152)
    matcher.fill_next_token_bitmask(bitmask, 0)
    return bitmask.numpy().tobytes(), matcher.is_accepting(), matcher.num_tokens


def _allowed(matcher, rng: random.Random) -> int | None:
    bitmask = allocate_token_bitmask(1, 49152)
    matcher.fill_next_token_bitmask(bitmask, 0)
    ids = [i for i in bitmask_to_bool(bitmask, 49152)[0].nonzero().flatten().tolist() if i != 2]
    return rng.choice(ids) if ids else None


class RandomProposer:
    """Proposes tokens the matcher allows at the current state (so drafts go deep)."""

    def __init__(self, matcher, rng: random.Random) -> None:
        self.matcher, self.rng = matcher, rng

    def lookup(self, context: list[int], k: int) -> tuple[list[int], int]:
        t = _allowed(self.matcher, self.rng)
        return ([], 0) if t is None else ([t], 4)


@pytest.mark.parametrize("index", range(len(CONSTRAINTS)))
@pytest.mark.parametrize("seed", [0])
def test_drafts_leave_the_matcher_where_it_was(compiler, tokenizer, index, seed):
    rng = random.Random(seed)
    matcher = compiler.compile(CONSTRAINTS[index]).new_matcher()
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=6), tokenizer)
    drafter.proposer = RandomProposer(matcher, rng)
    params = SamplingParams(temperature=0)
    seq = Sequence(1, "r", 0, [1], 1, params, 256, torch.Generator(), matcher=matcher)
    seq.num_computed_tokens = 1
    drafted = 0
    for _ in range(30):
        before = _state(matcher)
        drafts = drafter.drafts(seq)
        drafted += len(drafts)
        assert _state(matcher) == before
        for t in drafts:  # the drafts are a path the constraint accepts
            assert matcher.accept_token(t)
        matcher.rollback(len(drafts))
        assert _state(matcher) == before
        token = _allowed(matcher, rng)  # a verified token moves on
        if token is None or matcher.is_terminated():
            break
        assert matcher.accept_token(token)
        seq.token_ids.append(token)
        seq.num_computed_tokens += 1
    assert drafted > 0


class NoProposer:
    def lookup(self, context: list[int], k: int) -> tuple[list[int], int]:
        return [], 0


@pytest.mark.parametrize(
    ("constraint", "text"),
    [
        (
            Constraint.json_schema(
                {"type": "object", "properties": {"job": {"type": "string"}}, "required": ["job"]},
                whitespace="compact",
            ),
            '{"job":"',
        ),
        (
            Constraint.json_schema(
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                whitespace="compact",
            ),
            '{"n":',
        ),
    ],
)
def test_forced_text_is_drafted_as_its_tokens(compiler, tokenizer, constraint, text):
    """Text the constraint forces beyond its forced tokens (``":"`` could start a longer token)
    is drafted as its own tokenization, free of proposals; the matcher is left where it was."""
    matcher = compiler.compile(constraint).new_matcher()
    drafter = Drafter(SpeculativeConfig(num_speculative_tokens=2), tokenizer)
    drafter.proposer = NoProposer()
    seq = Sequence(1, "r", 0, [1], 1, SamplingParams(temperature=0), 256, torch.Generator())
    seq.matcher, seq.num_computed_tokens = matcher, 1
    before = _state(matcher)
    drafts = drafter.drafts(seq)
    assert tokenizer.decode(drafts) == text
    assert len(drafts) > len(matcher.jump_forward_tokens())  # more than the forced tokens
    assert _state(matcher) == before
