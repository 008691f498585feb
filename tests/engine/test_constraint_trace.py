"""``SamplingParams(trace=True)``: the trace lists every output token in order with how it came
(chosen among N allowed, forced by the grammar, closed by ``close_on_length``), checked against a
fresh matcher replayed over the output: each sampled step's N is that matcher's allowed count
there, each forced token is one the matcher forces there; off by default."""

from __future__ import annotations

import json

import pytest

from stencil import SamplingParams
from stencil.constraints import Constraint, allocate_token_bitmask, bitmask_to_bool
from stencil.testing.tiny_models import make_llm

FIXED_KEYS = {
    "type": "object",
    "properties": {"first_name": {"type": "string"}, "years": {"type": "integer"}},
    "required": ["first_name", "years"],
}
CASES = [
    # (constraint, max_tokens, close_on_length, kinds that must appear)
    (Constraint.json_schema(FIXED_KEYS), 60, True, {"sampled", "forced"}),
    (Constraint.choice(["alpha", "beta", "gamma"]), 10, False, {"sampled"}),
    (Constraint.regex(r"[a-z]{3,30}"), 6, True, {"sampled"}),
    (Constraint.json_schema({"type": "array", "items": {"type": "string"}}), 8, True, {"closed"}),
]


@pytest.fixture(scope="module")
def llm(tiny_models):
    return make_llm(tiny_models["llama-tied"], block_size=4, num_kv_blocks=256)


def _allowed(matcher, vocab: int) -> int:
    bitmask = allocate_token_bitmask(1, vocab)
    matcher.fill_next_token_bitmask(bitmask, 0)
    return int(bitmask_to_bool(bitmask, vocab)[0].sum())


@pytest.mark.parametrize(("constraint", "max_tokens", "close", "kinds"), CASES)
def test_trace_matches_a_replayed_matcher(llm, constraint, max_tokens, close, kinds) -> None:
    params = SamplingParams(
        temperature=0.8,
        seed=3,
        max_tokens=max_tokens,
        constraint=constraint,
        close_on_length=close,
        trace=True,
    )
    out = llm.generate(["Write it:"], params)[0].outputs[0]
    trace = out.trace
    assert [s.token_id for s in trace.steps] == out.token_ids
    assert kinds <= {s.kind for s in trace.steps}
    closed = any(s.kind == "closed" for s in trace.steps)  # its step's sampled token undone
    assert trace.num_steps == sum(s.kind == "sampled" for s in trace.steps) + closed
    assert trace.mask_seconds > 0 and trace.forward_seconds > 0
    engine = llm.engine
    matcher = engine.guided.compiler.compile(constraint).new_matcher()
    for i, step in enumerate(trace.steps):
        if step.kind == "sampled":
            assert step.allowed == _allowed(matcher, engine.vocab_size), i
        elif step.kind == "forced":
            assert matcher.jump_forward_tokens()[:1] == [step.token_id], i
        if step.token_id not in engine.eos_token_ids:
            assert matcher.accept_token(step.token_id), i
    if constraint.kind == "json_schema" and out.finish_reason == "stop":
        json.loads(out.text)


def test_off_by_default(llm) -> None:
    params = SamplingParams(max_tokens=8, constraint=Constraint.regex("[a-z]+"))
    assert llm.generate(["x"], params)[0].outputs[0].trace is None
