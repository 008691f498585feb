"""Helpers shared by the engine tests: tiny random-weight model builders for every supported
architecture variant (``tiny``: one table row per variant, here and in ``tiny_dense`` /
``tiny_moe``), an ``LLM`` factory and transformers' reference (its models, greedy, logits)."""

from __future__ import annotations

import copy
import functools
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def tiny_config(cls_name: str, **fields: Any) -> Any:
    """A ``transformers`` config of class ``cls_name``: the shared tiny sizes (``_COMMON``)
    with ``fields`` over them (copied: transformers may rewrite a rope dict in place)."""
    import transformers

    return getattr(transformers, cls_name)(**{**_COMMON, **copy.deepcopy(fields)})


def tiny(cls_name: str, **fields: Any) -> Callable[[], Any]:
    """A builder (called with no arguments) of ``tiny_config(cls_name, **fields)``."""
    return functools.partial(tiny_config, cls_name, **fields)


ARCH_BUILDERS = {
    "llama-tied": tiny("LlamaConfig", tie_word_embeddings=True, rope_theta=10000.0),
    "llama3-rope-untied": tiny(
        "LlamaConfig",
        num_hidden_layers=3,
        tie_word_embeddings=False,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    ),
    "qwen2-bias": tiny("Qwen2Config", tie_word_embeddings=True, use_sliding_window=False),
    # head_dim deliberately != hidden_size / heads, as in real Qwen3 checkpoints
    "qwen3-qknorm": tiny(
        "Qwen3Config", head_dim=32, tie_word_embeddings=False, use_sliding_window=False
    ),
    "mistral-swa8": tiny("MistralConfig", tie_word_embeddings=False, sliding_window=8),
    # yarn rope (Qwen2.5 long context) + sliding window on the upper layers only
    "qwen2-yarn-swa": tiny(
        "Qwen2Config",
        num_hidden_layers=3,
        tie_word_embeddings=False,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
        use_sliding_window=True,
        sliding_window=6,
        max_window_layers=1,
    ),
    "llama-linear-rope": tiny("LlamaConfig", rope_scaling={"rope_type": "linear", "factor": 4.0}),
}
ARCHS = ["llama-tied", "llama3-rope-untied", "qwen2-bias", "qwen3-qknorm", "mistral-swa8"]
EXTRA_ARCHS = ["qwen2-yarn-swa", "llama-linear-rope"]  # fewer modes, to keep the suite short


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


def build_tiny_models(
    builders: dict[str, Callable[[], Any]], root: Path, tokenizer_src: Path
) -> dict[str, Path]:
    """name -> the directory of ``build_tiny_model`` for each of ``builders``."""
    return {
        name: build_tiny_model(name, root / name, tokenizer_src, build())
        for name, build in builders.items()
    }


def hf_loader(dirs: dict[str, Path]) -> Callable[[str], Any]:
    """name -> transformers' model of ``dirs[name]`` (fp32, eager attention): the reference,
    loaded on first use and kept."""
    cache: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in cache:
            from transformers import AutoModelForCausalLM

            cache[name] = AutoModelForCausalLM.from_pretrained(
                dirs[name], dtype=torch.float32, attn_implementation="eager"
            ).eval()
        return cache[name]

    return get


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
    assert len(seen) == 1, "all prompts should be prefilled in one step"
    with torch.no_grad():
        logits = model.compute_logits(seen[0], llm.engine.runner.ops)
    while llm.engine.has_unfinished_requests():
        llm.engine.step()
    return list(logits.split([len(p) for p in prompts]))
