"""Mixture-of-experts models against transformers: every family's logits on a mixed batch longer
than its sliding window, greedy continuations under prefix caching, chunked prefill and forced
preemption; the router and the grouped experts against a per-token loop, with experts left empty."""

from __future__ import annotations

import pytest
import torch

from stencil import SamplingParams
from stencil.engine.models.moe import MoeSpec, SparseMoeBlock, route
from stencil.kernels import get_kernels
from stencil.testing.tiny_models import (
    build_tiny_models,
    hf_greedy,
    hf_loader,
    make_llm,
    prefill_logits,
)
from stencil.testing.tiny_moe import MOE_BUILDERS

ATOL = 1e-4  # fp32 logits, |logit| up to ~1
GEN = 24
_BASE = [1] + [100 + 37 * i for i in range(19)]
PROMPTS = [_BASE + [4000, 4001], [7], _BASE + list(range(5000, 5010)), [9, 8, 7, 6, 5]]
MODES = {
    "prefix-chunked": dict(max_num_batched_tokens=16),
    "preempt": dict(num_kv_blocks=24, enable_prefix_caching=False),
}


@pytest.fixture(scope="module")
def moe_models(tmp_path_factory, default_model_dir):
    return build_tiny_models(MOE_BUILDERS, tmp_path_factory.mktemp("tiny_moe"), default_model_dir)


@pytest.fixture(scope="module")
def moe_hf(moe_models):
    return hf_loader(moe_models)


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("arch", list(MOE_BUILDERS))
def test_moe_logits_match_transformers(arch, backend, moe_models, moe_hf):
    """One prefill step over mixed prompt lengths (longest 30 > every sliding window of 8)."""
    llm = make_llm(moe_models[arch], block_size=4, num_kv_blocks=128, attention_backend=backend)
    for p, ours in zip(PROMPTS, prefill_logits(llm, PROMPTS), strict=True):
        with torch.no_grad():
            ref = moe_hf(arch)(torch.tensor([p])).logits[0]
        diff = (ours - ref).abs().max().item()
        assert diff < ATOL, f"{arch}: prompt of {len(p)} tokens, max abs diff {diff:.2e}"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("arch", list(MOE_BUILDERS))
def test_moe_greedy_matches_transformers(arch, mode, moe_models, moe_hf):
    kw = {"block_size": 4, "num_kv_blocks": 256, **MODES[mode]}
    llm = make_llm(moe_models[arch], **kw)
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    refs = [hf_greedy(moe_hf(arch), p, GEN) for p in PROMPTS]
    assert llm.generate([PROMPTS[0]], params, use_tqdm=False)[0].outputs[0].token_ids == refs[0]
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == refs
    m = llm.get_metrics()
    if mode == "preempt":
        assert m["num_preemptions_total"] > 0
    else:
        assert m["prefix_cache_hits_total"] > 0


SPECS = {
    "softmax-topk": MoeSpec(16, 2, 8, False, False, False, 0, None, 1.0),
    "renormalised": MoeSpec(16, 4, 8, True, False, False, 0, None, 1.0),
    "gpt-oss": MoeSpec(16, 4, 8, False, True, True, 0, 0.5, 1.702),
    "shared-expert": MoeSpec(16, 2, 8, False, False, False, 12, None, 1.0),
}


class _Config:
    hidden_size = 32


def _block(spec: MoeSpec) -> SparseMoeBlock:
    torch.manual_seed(0)
    block = SparseMoeBlock(_Config(), spec)
    for p in block.parameters():
        torch.nn.init.normal_(p, 0.0, 0.5)
    return block


def _per_token_loop(block: SparseMoeBlock, x: torch.Tensor, ops) -> torch.Tensor:
    """Each token through its top-k experts one by one, weighted, plus the shared expert."""
    spec = block.spec
    weights, ids = route(block.router(x).float(), spec)
    expect = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for w, e in zip(weights[t], ids[t], strict=True):
            expect[t] += w * block.experts[int(e)](x[t : t + 1], ops)[0]
        if spec.shared_intermediate:
            gate = torch.sigmoid(block.shared_expert_gate(x[t]))
            expect[t] += gate * block.shared_expert(x[t : t + 1], ops)[0]
    return expect


@pytest.mark.parametrize("name", list(SPECS))
def test_grouped_experts_match_a_per_token_loop(name):
    """3 rows, 16 experts: most experts get no row; the grouped GEMMs equal a per-token loop."""
    spec = SPECS[name]
    block = _block(spec)
    x = torch.randn(3, 32)
    ops = get_kernels("cpu", "torch")
    with torch.no_grad():
        got = block(x, ops)
        _, ids = route(block.router(x).float(), spec)
        assert torch.bincount(ids.flatten(), minlength=16).eq(0).sum() >= 16 - 3 * spec.top_k
        torch.testing.assert_close(got, _per_token_loop(block, x, ops), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["shared-expert", "gpt-oss"])
def test_expert_params_follow_swapped_weights(name):
    """The experts' weights are gathered once per block and again after they are swapped (as
    loading and packing swap every expert's): a step after the swap runs the new weights."""
    block = _block(SPECS[name])
    x = torch.randn(2, 32)
    ops = get_kernels("cpu", "torch")
    with torch.no_grad():
        before = block(x, ops)
        assert block.expert_params() is block.expert_params()  # built once
        for e in block.experts:
            for m in (e.gate_up_proj, e.down_proj):
                m.weight = torch.nn.Parameter(m.weight * -1.5)
        got = block(x, ops)
        assert not torch.allclose(got, before)
        torch.testing.assert_close(got, _per_token_loop(block, x, ops), atol=1e-5, rtol=1e-5)


def test_routers_match_transformers():
    """The three routing rules against transformers' own router modules."""
    from transformers import GptOssConfig, MixtralConfig, Qwen3MoeConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssTopKRouter
    from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    torch.manual_seed(1)
    x = torch.randn(5, 16)
    cases = [
        (
            MixtralTopKRouter,
            MixtralConfig(hidden_size=16, num_local_experts=8),
            SPECS["renormalised"],
        ),
        (GptOssTopKRouter, GptOssConfig(hidden_size=16, num_local_experts=8), SPECS["gpt-oss"]),
        (
            Qwen3MoeTopKRouter,
            Qwen3MoeConfig(hidden_size=16, num_experts=8, norm_topk_prob=False),
            SPECS["softmax-topk"],
        ),
    ]
    for cls, config, spec in cases:
        config.num_experts_per_tok = spec.top_k
        hf = cls(config)
        for p in hf.parameters():
            torch.nn.init.normal_(p)
        with torch.no_grad():
            _, scores, idx = hf(x)
            logits = torch.nn.functional.linear(x, hf.weight, getattr(hf, "bias", None))
            weights, ids = route(logits.float(), spec)
        assert torch.equal(ids, idx), cls.__name__
        torch.testing.assert_close(weights, scores.float(), msg=cls.__name__)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [("hidden_act", "gelu", "hidden_act"), ("router_jitter_noise", 0.1, "router_jitter_noise")],
)
def test_unsupported_moe_settings_are_config_errors(field, value, named):
    from stencil.engine.errors import ConfigError
    from stencil.engine.models.moe import moe_spec

    config = MOE_BUILDERS["mixtral-swa8"]()
    setattr(config, field, value)
    with pytest.raises(ConfigError, match=named):
        moe_spec(config)
