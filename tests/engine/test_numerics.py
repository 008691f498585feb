"""Model numerics against transformers (the oracle): logits of a mixed-length batch, greedy
continuations under every scheduling regime (prefix caching on/off, chunked prefill, preemption),
and logprobs along a decode."""

from __future__ import annotations

import pytest
import torch

from stencil import SamplingParams
from stencil.kernels import reference, with_layer_op_twins
from stencil.testing.tiny_models import ARCHS, EXTRA_ARCHS, hf_greedy, make_llm

ATOL = 1e-4
GEN = 32

# mixed lengths (1 .. 30); the two "shared" prompts share a 20-token prefix (5 blocks of 4)
_BASE = [1] + [100 + 37 * i for i in range(19)]
PROMPTS = [
    _BASE + [4000, 4001],
    [7],
    list(range(300, 313)),
    _BASE + [5000, 5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009],
    [9, 8, 7, 6, 5],
]


@pytest.fixture(scope="module")
def hf_refs(hf_models):
    """arch -> greedy HF continuations of PROMPTS (computed once per arch)."""
    cache: dict[str, list[list[int]]] = {}

    def get(arch: str) -> list[list[int]]:
        if arch not in cache:
            cache[arch] = [hf_greedy(hf_models(arch), p, GEN) for p in PROMPTS]
        return cache[arch]

    return get


def _capture_hidden(model):
    """Forward hook recording the hidden states [T, hidden] of every step's forward."""
    seen: list[torch.Tensor] = []
    handle = model.register_forward_hook(lambda m, args, out: seen.append(out.detach().clone()))
    return seen, handle


@pytest.mark.parametrize("backend", ["auto", "torch"])  # C kernels and layer ops; torch twins
@pytest.mark.parametrize("arch", ARCHS + EXTRA_ARCHS)
def test_logits_match_transformers_forward(arch, backend, tiny_models, hf_models):
    """One step prefilling a batch of mixed prompt lengths: every position's logits match."""
    llm = make_llm(tiny_models[arch], block_size=4, num_kv_blocks=128, attention_backend=backend)
    eng = llm.engine
    seen, handle = _capture_hidden(eng.runner.model)
    try:
        for i, p in enumerate(PROMPTS):
            eng.add_request(f"r{i}", p, SamplingParams(temperature=0, max_tokens=2))
        eng.step()
    finally:
        handle.remove()
    assert len(seen) == 1, "all prompts should be prefilled in one step"
    with torch.no_grad():
        ours = eng.runner.model.compute_logits(seen[0], eng.runner.ops)  # [T, vocab]
    assert ours.shape[0] == sum(map(len, PROMPTS))
    hf = hf_models(arch)
    off = 0
    for p in PROMPTS:
        with torch.no_grad():
            ref = hf(torch.tensor([p])).logits[0].float()
        diff = (ours[off : off + len(p)] - ref).abs().max().item()
        assert diff < ATOL, f"{arch}: prompt of {len(p)} tokens, max abs diff {diff:.2e}"
        off += len(p)
    while eng.has_unfinished_requests():
        eng.step()
    assert eng.block_manager.num_free_blocks == eng.block_manager.num_blocks


@pytest.mark.parametrize("arch", ["qwen3-qknorm", "qwen2-yarn-swa"])
def test_bfloat16_fused_layer_ops_match_their_twins(arch, tiny_models):
    """A bf16 forward (prefill, then decode) with the C layer ops and with the torch twins: the C
    ops round where the twins round, so the hidden states agree to a bf16 step (bit-equal when
    written, 2026-12-01)."""
    llm = make_llm(tiny_models[arch], dtype="bfloat16", block_size=4, num_kv_blocks=128)
    eng = llm.engine
    fused = eng.runner.ops
    assert fused.name == "cpu" and fused.rms_norm is not reference.rms_norm
    twins = with_layer_op_twins(fused)
    seen, handle = _capture_hidden(eng.runner.model)
    try:
        for i, p in enumerate(PROMPTS):
            eng.add_request(f"r{i}", p, SamplingParams(temperature=0, max_tokens=3))
        for _ in range(2):  # prefill, then one decode step: each step with both op sets
            sched = eng.scheduler.schedule()
            for ops in (twins, fused):
                eng.runner.ops = ops
                eng.runner.execute(sched)
            eng._run(sched)
    finally:
        handle.remove()
        eng.runner.ops = fused
    for step in (0, 1):
        want, got = seen[3 * step].float(), seen[3 * step + 1].float()
        assert torch.equal(got, seen[3 * step + 2].float())  # the fused run is repeatable
        torch.testing.assert_close(got, want, atol=1e-2, rtol=2**-7)


@pytest.mark.parametrize("arch", ["llama3-rope-untied", "mistral-swa8"])
def test_decode_logprobs_match_transformers(arch, tiny_models, hf_models):
    """Chunked prefill + decode: each position's chosen/top-5 logprobs equal HF's log_softmax."""
    llm = make_llm(tiny_models[arch], block_size=4, num_kv_blocks=128, max_num_batched_tokens=8)
    params = SamplingParams(temperature=0, max_tokens=12, logprobs=5, ignore_eos=True)
    prompts = [PROMPTS[0], PROMPTS[2], PROMPTS[4]]
    outs = llm.generate(prompts, params, use_tqdm=False)
    hf = hf_models(arch)
    for p, out in zip(prompts, outs, strict=True):
        c = out.outputs[0]
        assert len(c.logprobs) == len(c.token_ids) == 12
        full = p + c.token_ids
        with torch.no_grad():
            ref = torch.log_softmax(hf(torch.tensor([full])).logits[0].float(), -1)
        for j, pos in enumerate(c.logprobs):
            row = ref[len(p) - 1 + j]
            tok = c.token_ids[j]
            assert pos.chosen.token_id == tok == int(row.argmax())
            assert abs(pos.chosen.logprob - row[tok].item()) < ATOL
            vals, ids = torch.topk(row, 5)
            assert [t.token_id for t in pos.top] == ids.tolist()
            got = torch.tensor([t.logprob for t in pos.top])
            assert (got - vals).abs().max().item() < ATOL


MODES = {
    "prefix-on": dict(enable_prefix_caching=True),
    "prefix-off": dict(enable_prefix_caching=False),
    "chunked": dict(max_num_batched_tokens=16),
    "preempt": dict(num_kv_blocks=24, enable_prefix_caching=False),
    "preempt-prefix-chunked": dict(num_kv_blocks=24, max_num_batched_tokens=16),
}


# the scheduling regimes are the same code for every architecture: all of them on Llama and on
# the sliding-window Mistral (its window meets preemption and prefix hits), the regime that holds
# them all (preemption, prefix hits, chunked prefill) on the others; the rest in -m slow
EVERY_MODE = ("llama-tied", "mistral-swa8")
ALL_IN_ONE = "preempt-prefix-chunked"


@pytest.mark.parametrize(
    ("arch", "mode"),
    [
        (a, m) if a in EVERY_MODE or m == ALL_IN_ONE else pytest.param(a, m, marks=pytest.mark.slow)
        for a in ARCHS
        for m in MODES
    ],
)
def test_greedy_matches_transformers_generate(arch, mode, tiny_models, hf_refs):
    kw = {"block_size": 4, "num_kv_blocks": 256, **MODES[mode]}
    llm = make_llm(tiny_models[arch], **kw)
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    refs = hf_refs(arch)
    # warm the prefix cache with the shared prefix so the batch below can hit it
    first = llm.generate([PROMPTS[0]], params, use_tqdm=False)[0]
    assert first.outputs[0].token_ids == refs[0]
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        c = out.outputs[0]
        assert c.finish_reason == "length"
        assert c.token_ids == ref, f"{arch}/{mode}: prompt {i} diverges from transformers"
    m = llm.get_metrics()
    if kw.get("enable_prefix_caching", True):
        assert m["prefix_cache_hits_total"] > 0
    else:
        assert m["prefix_cache_hits_total"] == 0
    if mode.startswith("preempt"):
        assert m["num_preemptions_total"] > 0
    bm = llm.engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks
    assert not llm.engine.scheduler.running and not llm.engine.scheduler.waiting


@pytest.mark.parametrize("arch", EXTRA_ARCHS)
def test_greedy_matches_transformers_generate_extra_variants(arch, tiny_models, hf_refs):
    kw = {"block_size": 4, **MODES[ALL_IN_ONE]}
    llm = make_llm(tiny_models[arch], **kw)
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == hf_refs(arch)
    assert llm.get_metrics()["num_preemptions_total"] > 0
