"""An HF config's architecture metadata as llama.cpp's converter writes it (the inverse of
``engine/models/gguf_arch.hf_config`` and of transformers' GGUF config reader), for the GGUF
writer of the tests and benchmarks."""

from __future__ import annotations

import numpy as np

from stencil.engine.errors import ConfigError
from stencil.engine.models.gguf_arch import OWN_CONFIGS
from stencil.engine.models.layers import head_dim as _head_dim

# HF model type -> GGUF architecture
GGUF_ARCHS = {"llama": "llama", "qwen2": "qwen2", **{v: k for k, v in OWN_CONFIGS.items()}}


def gguf_arch(config) -> str:
    arch = GGUF_ARCHS.get(config.model_type)
    if arch is None:
        raise ConfigError(f"cannot write GGUF metadata for {config.model_type!r}")
    return arch


def write_metadata(writer, config) -> dict[str, np.ndarray]:
    """Write ``config``'s keys; returns the extra float tensors (LongRoPE factors) to store."""
    arch = gguf_arch(config)
    if arch in ("smollm3", "olmo2") and getattr(config, "use_sliding_window", False):
        raise ConfigError(f"llama.cpp's {arch} has no sliding window")
    dim = _head_dim(config)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    if arch not in ("llama", "qwen2", "granite"):
        writer.add_key_length(dim)
        writer.add_value_length(dim)
    params = getattr(config, "rope_parameters", None) or {}
    if arch == "gemma3":
        full, local = params["full_attention"], params["sliding_attention"]
        writer.add_rope_freq_base(float(full["rope_theta"]))
        writer.add_rope_freq_base_swa(float(local["rope_theta"]))
        if full.get("rope_type") == "linear":
            writer.add_rope_scaling_type(_scaling("LINEAR"))
            writer.add_rope_scaling_factor(float(full["factor"]))
    else:
        writer.add_rope_freq_base(float(params.get("rope_theta", 1e4)))
    rot = int(dim * params.get("partial_rotary_factor", 1.0))
    writer.add_rope_dimension_count(rot)
    if arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(config.sliding_window)
        writer.add_sliding_window_pattern([t == "sliding_attention" for t in config.layer_types])
        if config.final_logit_softcapping is not None:
            writer.add_final_logit_softcapping(config.final_logit_softcapping)
        if arch == "gemma2":
            writer.add_attn_logit_softcapping(config.attn_logit_softcapping)
    if arch == "granite":
        writer.add_embedding_scale(config.embedding_multiplier)
        writer.add_residual_scale(config.residual_multiplier)
        writer.add_attention_scale(config.attention_multiplier)
        writer.add_logit_scale(config.logits_scaling)
    extra: dict[str, np.ndarray] = {}
    if arch == "phi3" and params.get("rope_type") == "longrope":
        from stencil.engine.models.layers import rope_inv_freq

        original = int(params["original_max_position_embeddings"])
        writer.add_rope_scaling_type(_scaling("LONGROPE"))
        writer.add_rope_scaling_orig_ctx_len(original)
        writer.add_rope_scaling_attn_factors(rope_inv_freq(config)[1])
        extra["rope_factors_long.weight"] = np.asarray(params["long_factor"], np.float32)
        extra["rope_factors_short.weight"] = np.asarray(params["short_factor"], np.float32)
    if arch == "phi3" and getattr(config, "sliding_window", None):
        writer.add_sliding_window(config.sliding_window)
    return extra


def _scaling(name: str):
    import gguf

    return gguf.RopeScalingType[name]
