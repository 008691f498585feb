"""MoE GGUF files as llama.cpp's converter writes them (experts stacked, llama.cpp names and MoE
metadata; Mixtral as ``llama`` with experts): the experts stay quantized (Q8_0, Q4_0, MXFP4), and
Stencil's logits and greedy tokens match transformers' forward of the same weights dequantized."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file, save_file

from stencil import SamplingParams
from stencil.kernels.quant_weight import is_quantized
from stencil.testing.gguf_moe_writer import write_moe_gguf
from stencil.testing.tiny_models import build_tiny_model, hf_greedy, make_llm, prefill_logits
from stencil.testing.tiny_moe import gguf_twin_config, round_trip_experts

EXPERT_TYPES = {"qwen2-moe-shared": "Q8_0", "qwen3-moe": "Q4_0", "mixtral-swa8": "Q8_0"}
EXPERT_TYPES["gpt-oss"] = "MXFP4"
# max |logit diff| / max |logit|: the reference kernels dequantize exactly (measured < 1e-5); the
# C kernel rounds activations to int8 per 32 (or bf16), as in test_gguf_quantized.py (5e-2 there
# for dense models); here a rounded activation can also flip a near-tied expert choice, which moves
# that token's logits further (measured 1.3e-1 on GPT-OSS, where the dense forward gives 1.4e-6)
FP32_BOUND = 1e-4
C_KERNEL_BOUND = 2e-1
_BASE = [1] + [100 + 37 * i for i in range(19)]
PROMPTS = [_BASE + [4000, 4001], [7], _BASE + list(range(5000, 5010))]
GEN = 16


@pytest.fixture(scope="module")
def moe_gguf(tmp_path_factory, default_model_dir, gguf_tokenizer_fields):
    """name -> (GGUF path, transformers model of the same weights dequantized)."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("moe_gguf")
    out = {}
    for name, qtype in EXPERT_TYPES.items():
        d = build_tiny_model(name, root / name, default_model_dir, gguf_twin_config(name))
        state = round_trip_experts(load_file(d / "model.safetensors"), qtype)
        save_file(state, d / "model.safetensors", metadata={"format": "pt"})
        hf = AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        path = root / f"{name}.gguf"
        write_moe_gguf(
            path,
            hf.config,
            state,
            lambda n, s, q=qtype: q if "_exps" in n else "F32",
            gguf_tokenizer_fields,
        )
        out[name] = (path, hf)
    return out


# the reference kernels' logits on Qwen3 (each architecture's exact greedy run below takes the
# same kernels), the C kernel's on Qwen3 and GPT-OSS; the other architectures' logits in -m slow
CASES = [
    pytest.param(n, "torch", marks=pytest.mark.slow) if n in ("qwen2-moe-shared", "mixtral-swa8")
    else (n, "torch") for n in EXPERT_TYPES
] + [("qwen3-moe", "auto"), ("gpt-oss", "auto")]  # fmt: skip


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_moe_gguf_logits_match_the_dequantized_forward(name, backend, moe_gguf):
    path, hf = moe_gguf[name]
    llm = make_llm(path, block_size=4, num_kv_blocks=64, attention_backend=backend)
    model = llm.engine.runner.model
    experts = next(layer.mlp for layer in model.layers if hasattr(layer.mlp, "experts"))
    assert is_quantized(experts.experts[0].gate_up_proj.weight)
    bound = FP32_BOUND if backend == "torch" else C_KERNEL_BOUND
    with torch.no_grad():
        for p, ours in zip(PROMPTS, prefill_logits(llm, PROMPTS), strict=True):
            ref = hf(torch.tensor([p])).logits[0]
            rel = (ours - ref).abs().max().item() / ref.abs().max().item()
            assert rel < bound, f"{name}: prompt of {len(p)} tokens, relative diff {rel:.2e}"


@pytest.mark.parametrize("name", list(EXPERT_TYPES))
def test_moe_gguf_greedy_under_preemption_and_prefix_hits(name, moe_gguf):
    """Reference kernels (exact dequantized weights): greedy equals transformers' through forced
    preemption and prefix-cache hits, prompts longer than the sliding windows."""
    path, hf = moe_gguf[name]
    llm = make_llm(
        path, block_size=4, num_kv_blocks=20, max_num_batched_tokens=16, attention_backend="torch"
    )
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    refs = [hf_greedy(hf, p, GEN) for p in PROMPTS]
    llm.generate([PROMPTS[0]], params, use_tqdm=False)
    outs = llm.generate(PROMPTS, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == refs
    m = llm.get_metrics()
    assert m["num_preemptions_total"] > 0 and m["prefix_cache_hits_total"] > 0


def test_mxfp4_experts_decode_exactly():
    """MXFP4 blocks -> 8-bit codes and power-of-two scales: gguf's own dequantizer, bit for bit."""
    import gguf

    from stencil.engine.models.gguf_quants import decode
    from stencil.engine.models.quantized import dequantize_codes

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((16, 64)) * np.logspace(-4, 1, 16)[:, None]).astype(np.float32)
    w[3, :32] = 0  # an all-zero block (exponent byte 0)
    kind = gguf.GGMLQuantizationType.MXFP4
    blocks = gguf.quants.quantize(w, kind)
    np.testing.assert_array_equal(
        dequantize_codes(decode(blocks, "MXFP4", w.shape)), gguf.quants.dequantize(blocks, kind)
    )
