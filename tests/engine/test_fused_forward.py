"""The layer loop (``engine/fused_forward.py`` over ``kernels/cpu_layer_loop.py``): for tiny
random-weight Llama (Q4_1, untied) and Qwen2 (a K-quant mix like a Q4_K_M file's: q/k in Q8_0 and
v in Q6_K as one split projection, q/k/v bias, Q4_K gate/up, Q6_K down, tied) GGUF files it replaces the
model's forward, and the hidden states, logprobs and greedy tokens equal the per-layer Python
forward's bit for bit (same kernels, same order): prefill, chunked prefill, batched decode,
prefix-cache hits. Models outside its shape (Qwen3's q/k norms, dense weights, the torch kernels)
keep their own forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

from stencil import SamplingParams
from stencil.engine.fused_forward import FusedForward, uninstall
from stencil.kernels.quant_weight import SplitWeight
from stencil.testing.gguf_writer import write_model_gguf
from stencil.testing.tiny_models import make_llm, prefill_logits

SHAPE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=49152, max_position_embeddings=512,
             rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)  # fmt: skip
MIX = {"v_proj": "Q6_K", "gate_proj": "Q4_K", "up_proj": "Q4_K", "down_proj": "Q6_K"}
FILES = {  # name -> (config class, tied, GGML type of a matrix by its HF name)
    "llama-q4_1": (LlamaConfig, False, lambda name: "Q4_1"),
    "qwen2-mix": (
        Qwen2Config,
        True,
        lambda name: next((q for part, q in MIX.items() if part in name), "Q8_0"),
    ),
}
PROMPTS = [[1, 100, 2000, 300, 4000, 50, 6000, 70], [9, 8, 7, 6, 5], list(range(300, 345))]


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory, gguf_tokenizer_fields):
    root = tmp_path_factory.mktemp("fused_forward")
    out = {}
    for name, (cls, tied, qtype) in FILES.items():
        config = cls(**SHAPE, tie_word_embeddings=tied)
        rng = np.random.default_rng(len(name))
        state = {}
        for key, p in AutoModelForCausalLM.from_config(config).state_dict().items():
            w = rng.standard_normal(tuple(p.shape)).astype(np.float32)
            state[key] = 1 + 0.1 * w if "norm" in key else w * (0.02 if "embed" in key else 0.075)
        if tied:
            state.pop("lm_head.weight", None)
        out[name] = root / f"{name}.gguf"
        write_model_gguf(
            out[name], config, state, lambda n, s, q=qtype: q(n), gguf_tokenizer_fields
        )
    return out


def engines(path, **kw):
    """(fused, per-layer Python) engines on the same file."""
    fused, plain = make_llm(path, block_size=4, num_kv_blocks=128, **kw), None
    plain = make_llm(path, block_size=4, num_kv_blocks=128, **kw)
    uninstall(plain.engine.runner.model)
    return fused, plain


@pytest.mark.parametrize("name", ["llama-q4_1", "qwen2-mix"])
def test_prefill_hidden_states_are_identical(name, gguf_files):
    fused, plain = engines(gguf_files[name])
    assert isinstance(fused.engine.runner.model.forward, FusedForward)
    assert not isinstance(plain.engine.runner.model.forward, FusedForward)
    qkv = fused.engine.runner.model.layers[0].self_attn.qkv_proj.weight
    assert isinstance(qkv, SplitWeight) == (name == "qwen2-mix")  # q/k Q8_0, v Q6_K
    for a, b in zip(prefill_logits(fused, PROMPTS), prefill_logits(plain, PROMPTS), strict=True):
        assert torch.equal(a, b)


CASES = {  # label -> engine settings
    "batched decode": dict(),
    "chunked prefill": dict(max_num_batched_tokens=16),
    "no prefix caching": dict(enable_prefix_caching=False),
}


# every engine setting on the Q4_1 file, the K-quant mix (split q/k + v) with batched decode (its
# other settings take the same fused path: -m slow)
@pytest.mark.parametrize(
    ("name", "case"),
    [("llama-q4_1", c) for c in CASES]
    + [("qwen2-mix", "batched decode")]
    + [pytest.param("qwen2-mix", c, marks=pytest.mark.slow) for c in list(CASES)[1:]],
)
def test_decoded_tokens_and_logprobs_are_identical(name, case, gguf_files):
    fused, plain = engines(gguf_files[name], **CASES[case])
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, logprobs=3)
    for _ in range(2):  # the second round hits the prefix cache where it is on
        a = fused.generate(PROMPTS, params, use_tqdm=False)
        b = plain.generate(PROMPTS, params, use_tqdm=False)
        for x, y in zip(a, b, strict=True):
            assert x.outputs[0].token_ids == y.outputs[0].token_ids
            assert x.outputs[0].logprobs == y.outputs[0].logprobs


@pytest.mark.parametrize(
    "name, kw",
    [("qwen3-qknorm", {"quantization": "int8"}), ("llama-q4_1", {"attention_backend": "torch"}),
     ("llama-q4_1", {"quantization": "none"})],
)  # fmt: skip
def test_other_models_keep_their_own_forward(name, kw, gguf_files, tiny_models):
    path = gguf_files.get(name) or tiny_models[name]  # Qwen3: q/k norms, int8 at load
    llm = make_llm(path, block_size=4, num_kv_blocks=64, **kw)
    assert not llm.engine.runner.fused
    assert "forward" not in vars(llm.engine.runner.model)
    out = llm.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 4
