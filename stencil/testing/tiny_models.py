"""Helpers shared by the engine tests: tiny random-weight model builders for every supported
architecture variant, an ``LLM`` factory and transformers' greedy reference."""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import torch

VOCAB = 49152
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=2,
)


def _llama_tied():
    from transformers import LlamaConfig

    return LlamaConfig(**_COMMON, tie_word_embeddings=True, rope_theta=10000.0)


def _llama3_untied():
    from transformers import LlamaConfig

    return LlamaConfig(
        **{**_COMMON, "num_hidden_layers": 3},
        tie_word_embeddings=False,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    )


def _qwen2():
    from transformers import Qwen2Config

    return Qwen2Config(**_COMMON, tie_word_embeddings=True, use_sliding_window=False)


def _qwen3():
    from transformers import Qwen3Config

    # head_dim deliberately != hidden_size / heads, as in real Qwen3 checkpoints
    return Qwen3Config(**_COMMON, head_dim=32, tie_word_embeddings=False, use_sliding_window=False)


def _mistral():
    from transformers import MistralConfig

    return MistralConfig(**_COMMON, tie_word_embeddings=False, sliding_window=8)


def _qwen2_yarn_swa():
    from transformers import Qwen2Config

    # yarn rope (Qwen2.5 long context) + sliding window on the upper layers only
    return Qwen2Config(
        **{**_COMMON, "num_hidden_layers": 3},
        tie_word_embeddings=False,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
        use_sliding_window=True,
        sliding_window=6,
        max_window_layers=1,
    )


def _llama_linear_rope():
    from transformers import LlamaConfig

    return LlamaConfig(**_COMMON, rope_scaling={"rope_type": "linear", "factor": 4.0})


ARCH_BUILDERS = {
    "llama-tied": _llama_tied,
    "llama3-rope-untied": _llama3_untied,
    "qwen2-bias": _qwen2,
    "qwen3-qknorm": _qwen3,
    "mistral-swa8": _mistral,
}
ARCHS = ["llama-tied", "llama3-rope-untied", "qwen2-bias", "qwen3-qknorm", "mistral-swa8"]
EXTRA_ARCHS = ["qwen2-yarn-swa", "llama-linear-rope"]  # fewer modes, to keep the suite short
ARCH_BUILDERS["qwen2-yarn-swa"] = _qwen2_yarn_swa
ARCH_BUILDERS["llama-linear-rope"] = _llama_linear_rope


def build_tiny_model(name: str, out: Path, tokenizer_src: Path, config=None) -> Path:
    """Save a tiny random-weight model (``config`` or ``ARCH_BUILDERS[name]()``) to ``out``."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    torch.manual_seed(zlib.crc32(name.encode()))
    config = config if config is not None else ARCH_BUILDERS[name]()
    model = AutoModelForCausalLM.from_config(config).float().eval()
    # HF's init (std 0.02 everywhere) gives degenerate greedy continuations (one token repeated,
    # the tied embedding predicting itself); larger layer weights give varied ones, which makes
    # cache / preemption bugs visible
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.add_(0.1 * torch.randn_like(p))  # non-trivial norm weights
            elif "embed" in pname or "lm_head" in pname:
                p.normal_(0.0, 0.02)
            else:
                p.normal_(0.0, 0.15)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2).save_pretrained(out)
    for f in TOKENIZER_FILES:
        if (tokenizer_src / f).is_file():
            shutil.copy(tokenizer_src / f, out / f)
    return out


TEST_KV_BYTES = 64 << 20
"""KV budget of a test engine: the KV cache is zero-filled, so resident, when the engine starts;
the 1 GiB default per engine is what pushed the test process past its memory budget."""


def make_llm(model_dir, **kw):
    from stencil import LLM

    kw.setdefault("num_threads", 1)
    kw.setdefault("dtype", "float32")
    kw.setdefault("device", "cpu")
    kw.setdefault("seed", 0)
    kw.setdefault("kv_cache_memory", TEST_KV_BYTES)
    return LLM(model=str(model_dir), **kw)


def hf_greedy(hf_model, prompt_ids: list[int], n: int) -> list[int]:
    """transformers' greedy continuation of ``n`` tokens, never stopping at EOS."""
    from transformers import GenerationConfig

    ids = torch.tensor([prompt_ids])
    gc = GenerationConfig(
        max_new_tokens=n, min_new_tokens=0, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    with torch.no_grad():
        out = hf_model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    return out[0, len(prompt_ids) :].tolist()


def prefill_logits(llm, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Stencil's logits at every position of each prompt (``[len(p), vocab]`` each), from one
    prefill step over all of them; the requests are then run to completion."""
    from stencil import SamplingParams

    model = llm.engine.runner.model
    seen: list[torch.Tensor] = []
    handle = model.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone()))
    try:
        for i, p in enumerate(prompts):
            llm.engine.add_request(f"prefill{i}", p, SamplingParams(temperature=0, max_tokens=1))
        llm.engine.step()
    finally:
        handle.remove()
    with torch.no_grad():
        logits = model.compute_logits(seen[0], llm.engine.runner.ops)
    while llm.engine.has_unfinished_requests():
        llm.engine.step()
    return list(logits.split([len(p) for p in prompts]))
