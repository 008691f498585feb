"""The benchmarks' other model shapes, random weights saved with transformers as safetensors
directories in the cache (SmolLM2's tokenizer): Qwen2.5-0.5B's config (the result must not hinge
on one tiny model), and a small Qwen3-MoE (the mixture-of-experts path beside vLLM)."""

from __future__ import annotations

from pathlib import Path

import torch

from stencil import default_model_path
from stencil.paths import cache_root

QWEN_05B = dict(
    hidden_size=896,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    intermediate_size=4864,
    vocab_size=151936,
    tie_word_embeddings=True,
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
    rope_theta=1e6,
)


def qwen_05b_dir() -> Path:
    """Random weights in Qwen2.5-0.5B's shape (fp32 safetensors), with SmolLM2's tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    path = cache_root() / "bench" / "qwen2.5-0.5b-random"
    if (path / "config.json").is_file():
        return path
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**QWEN_05B), dtype=torch.float32)
    tmp = path.with_name(path.name + ".part")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(str(default_model_path())).save_pretrained(tmp)
    tmp.rename(path)
    return path


QWEN3_MOE = dict(
    hidden_size=1024,
    num_hidden_layers=4,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=64,
    num_experts=32,
    num_experts_per_tok=4,
    moe_intermediate_size=512,
    intermediate_size=2048,
    norm_topk_prob=True,
    vocab_size=49152,
    tie_word_embeddings=False,
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
)


def qwen3_moe_dir() -> Path:
    """A small Qwen3-MoE (32 experts of 512, 4 active, 4 layers; bf16 safetensors, ~0.6 GB)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3MoeConfig

    path = cache_root() / "bench" / "qwen3-moe-32x512-4l-random"
    if (path / "config.json").is_file():
        return path
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen3MoeConfig(**QWEN3_MOE), dtype=torch.bfloat16)
    tmp = path.with_name(path.name + ".part")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(str(default_model_path())).save_pretrained(tmp)
    tmp.rename(path)
    return path


def host_twin_dir() -> Path:
    """SmolLM2-135M's layer stack (30 layers, 9 heads, 3 KV heads, its vocab) with every width cut
    to a few numbers (head_dim 8): a fast, quieter stand-in for timing the phases of a step that do
    not depend on the widths (scheduling, metadata, sampling rows, output processing). Its forward
    is not free: odd-width linears and head_dim-8 attention cost ~0.06 / 0.2–1.4 ms a call."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    path = cache_root() / "bench" / "smollm2-host-twin"
    if (path / "config.json").is_file():
        return path
    torch.manual_seed(0)
    src = default_model_path()
    config = LlamaConfig.from_pretrained(str(src))
    config.hidden_size, config.intermediate_size, config.head_dim = 72, 64, 8
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tmp = path.with_name(path.name + ".part")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(tmp)
    tmp.rename(path)
    return path
