"""The supported architectures and how HF weight names map onto Stencil's fused parameters."""

from __future__ import annotations

import torch

from stencil.engine.models.moe import map_moe_weight

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "MistralForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    "GptOssForCausalLM",
)

MODEL_TYPES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
}


def fused_parts(target: str) -> int:
    return 3 if "qkv" in target else 2


_FUSED = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}


def map_weight(name: str, tensor: torch.Tensor, config):
    """HF weight name -> (our parameter name, tensor, shard index or None)."""
    if name.startswith("model."):
        name = name[len("model.") :]
    if "rotary_emb" in name:
        return []
    if name == "lm_head.weight" and getattr(config, "tie_word_embeddings", False):
        return []
    moe = map_moe_weight(name, tensor, config)
    if moe is not None:
        return moe
    parts = name.split(".")
    for i, p in enumerate(parts):
        if p in _FUSED:
            fused, idx = _FUSED[p]
            return [(".".join(parts[:i] + [fused] + parts[i + 1 :]), tensor, idx)]
    return [(name, tensor, None)]
