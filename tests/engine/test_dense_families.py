"""The dense families beyond Llama against transformers: every family's logits on a mixed batch
whose longest prompt (30 tokens) exceeds its sliding window (8), and greedy continuations with
prefix-cache hits, chunked prefill and forced preemption."""

from __future__ import annotations

import pytest
import torch

from stencil import SamplingParams
from stencil.kernels.quant_weight import is_quantized
from stencil.testing.tiny_dense import DENSE_BUILDERS
from stencil.testing.tiny_models import (
    build_tiny_model,
    build_tiny_models,
    hf_greedy,
    hf_loader,
    make_llm,
    prefill_logits,
)

ATOL = 1e-4  # fp32 logits
GEN = 24
_BASE = [1] + [100 + 37 * i for i in range(19)]
PROMPTS = [_BASE + [4000, 4001], [7], _BASE + list(range(5000, 5010)), [9, 8, 7, 6, 5]]
MODES = {
    "prefix-chunked": dict(max_num_batched_tokens=16),
    "preempt-prefix": dict(num_kv_blocks=20),
    # the sliding-window pool sized to its floor (2 windows + a step: 16 blocks against 64)
    "sliding-pool": dict(num_kv_blocks=64, max_num_seqs=2, max_num_batched_tokens=16),
}


@pytest.fixture(scope="module")
def dense_models(tmp_path_factory, default_model_dir):
    return build_tiny_models(
        DENSE_BUILDERS, tmp_path_factory.mktemp("tiny_dense"), default_model_dir
    )


@pytest.fixture(scope="module")
def dense_hf(dense_models):
    return hf_loader(dense_models)


def hf_logits(hf, prompt):
    with torch.no_grad():
        return hf(torch.tensor([prompt])).logits[0].float()


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("arch", list(DENSE_BUILDERS))
def test_dense_logits_match_transformers(arch, backend, dense_models, dense_hf):
    llm = make_llm(dense_models[arch], block_size=4, num_kv_blocks=128, attention_backend=backend)
    for p, ours in zip(PROMPTS, prefill_logits(llm, PROMPTS), strict=True):
        diff = (ours - hf_logits(dense_hf(arch), p)).abs().max().item()
        assert diff < ATOL, f"{arch}: prompt of {len(p)} tokens, max abs diff {diff:.2e}"


# every regime on the families with sliding-window layers; chunked prefill on the others, whose
# greedy run under preemption and prefix hits is the F32 GGUF test's (and without a window the
# sliding pool's regime is the chunked one): the rest in -m slow
SLIDING = ("gemma3", "gemma2-softcap", "smollm3-nope")


@pytest.mark.parametrize(
    ("arch", "mode"),
    [
        (a, m)
        if a in SLIDING or m == "prefix-chunked"
        else pytest.param(a, m, marks=pytest.mark.slow)
        for a in DENSE_BUILDERS
        for m in MODES
    ],
)
def test_dense_greedy_matches_transformers(arch, mode, dense_models, dense_hf):
    llm = make_llm(dense_models[arch], **{"block_size": 4, "num_kv_blocks": 256, **MODES[mode]})
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    # LongRoPE: transformers recomputes the whole cache with the long factors when a sequence
    # grows past the original length; Stencil (like vLLM) keeps the keys it cached. Compared
    # where the two agree: prompts already past it (the logits test covers the short ones)
    prompts = [p for p in PROMPTS if not arch.startswith("phi3") or len(p) > 16]
    refs = [hf_greedy(dense_hf(arch), p, GEN) for p in prompts]
    first = llm.generate([prompts[0]], params, use_tqdm=False)[0]  # warms the prefix cache
    assert first.outputs[0].token_ids == refs[0]
    outs = llm.generate(prompts, params, use_tqdm=False)
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        assert out.outputs[0].token_ids == ref, f"{arch}/{mode}: prompt {i} diverges"
    m = llm.get_metrics()
    assert m["prefix_cache_hits_total"] > 0
    if mode.startswith("preempt"):
        assert m["num_preemptions_total"] > 0
    bm = llm.engine.block_manager
    assert bm.num_free_blocks == bm.num_blocks
    if bm.sliding is not None:
        assert bm.sliding.pool.num_free_blocks == bm.sliding.pool.num_blocks
        if mode == "sliding-pool":
            assert bm.sliding.pool.num_blocks < bm.num_blocks


# ---- the same families from GGUF files -------------------------------------------------------
# the files hold what llama.cpp's converter can write: Gemma's query_pre_attn_scalar is head_dim
# there (llama.cpp derives it), SmolLM3 has no sliding window
# relative max |logit diff| of the Q8_0 file kept quantized against transformers on the file's
# dequantized weights: the C kernel rounds activations to int8 (see test_gguf_quantized)
Q8_BOUND = 5e-2


@pytest.fixture(scope="module")
def dense_gguf(tmp_path_factory, default_model_dir, gguf_tokenizer_fields):
    """arch -> (F32 GGUF, Q8_0 GGUF, HF model of the weights, HF model of the Q8_0 file's)."""
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM

    from stencil.engine.models.gguf import read_gguf_tensors
    from stencil.engine.models.layers import head_dim
    from stencil.testing.gguf_writer import write_model_gguf

    root = tmp_path_factory.mktemp("tiny_dense_gguf")
    out = {}
    for name, build in DENSE_BUILDERS.items():
        config = build()
        if name.startswith("gemma"):
            config.query_pre_attn_scalar = head_dim(config)
        if name.startswith("smollm3"):  # llama.cpp's smollm3 has no sliding window
            config = type(config)(
                **{**config.to_dict(), "use_sliding_window": False, "layer_types": None}
            )
        hf_dir = build_tiny_model(name, root / name, default_model_dir, config)
        state = load_file(str(hf_dir / "model.safetensors"))
        files = []
        for qtype in ("F32", "Q8_0"):
            path = root / f"{name}-{qtype}.gguf"
            write_model_gguf(path, config, state, lambda n, s, q=qtype: q, gguf_tokenizer_fields)
            files.append(path)
        hf = AutoModelForCausalLM.from_pretrained(
            hf_dir, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        hf_q8 = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
        deq = {k: torch.from_numpy(v) for k, v in read_gguf_tensors(files[1], config).items()}
        missing, unexpected = hf_q8.load_state_dict(deq, strict=False)
        assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
        hf_q8.tie_weights()
        out[name] = (*files, hf, hf_q8)
    return out


@pytest.mark.parametrize("arch", list(DENSE_BUILDERS))
def test_dense_gguf_matches_transformers(arch, dense_gguf):
    """The F32 file: logits within ATOL and greedy tokens equal (prefix hits, forced preemption);
    the Q8_0 file, kept quantized: logits within Q8_BOUND of the same model."""
    f32, q8, hf, hf_q8 = dense_gguf[arch]
    prompts = [p for p in PROMPTS if not arch.startswith("phi3") or len(p) > 16]
    llm = make_llm(f32, block_size=4, num_kv_blocks=20)
    for p, ours in zip(PROMPTS, prefill_logits(llm, PROMPTS), strict=True):
        assert (ours - hf_logits(hf, p)).abs().max().item() < ATOL, f"{arch}: {len(p)} tokens"
    params = SamplingParams(temperature=0, max_tokens=GEN, ignore_eos=True)
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == [hf_greedy(hf, p, GEN) for p in prompts]
    m = llm.get_metrics()
    assert m["num_preemptions_total"] > 0 and m["prefix_cache_hits_total"] > 0
    quant = make_llm(q8, block_size=4, num_kv_blocks=128)
    assert is_quantized(quant.engine.runner.model.layers[0].self_attn.qkv_proj.weight)
    for p, ours in zip(PROMPTS, prefill_logits(quant, PROMPTS), strict=True):
        ref = hf_logits(hf_q8, p)
        rel = (ours - ref).abs().max().item() / ref.abs().max().item()
        assert rel < Q8_BOUND, f"{arch}: Q8_0 file, {len(p)} tokens, relative diff {rel:.2e}"
