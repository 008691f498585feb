"""How HF weight names (and conventions) map onto Stencil's parameters: q/k/v and gate/up fused,
Gemma's ``1 + weight`` norms folded into plain ones."""

from __future__ import annotations

from stencil.engine.models.moe import map_moe_weight
from stencil.engine.models.registry import MODEL_TYPES, SUPPORTED_ARCHITECTURES

__all__ = ["MODEL_TYPES", "SUPPORTED_ARCHITECTURES", "fused_parts", "map_weight"]

# families whose RMSNorm scales by (1 + weight)
OFFSET_NORM_TYPES = ("gemma2", "gemma3_text")


def fused_parts(target: str) -> int:
    return 3 if "qkv" in target else 2


_FUSED = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}


def map_weight(name: str, tensor, config):
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
    if config.model_type in OFFSET_NORM_TYPES and name.endswith("norm.weight"):
        tensor = tensor + 1  # (1 + w) * x: a plain norm with weight 1 + w (float32 or numpy)
    parts = name.split(".")
    for i, p in enumerate(parts):
        if p in _FUSED:
            fused, idx = _FUSED[p]
            return [(".".join(parts[:i] + [fused] + parts[i + 1 :]), tensor, idx)]
    return [(name, tensor, None)]
