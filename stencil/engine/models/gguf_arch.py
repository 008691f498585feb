"""llama.cpp's per-architecture conventions, both ways: tensor names (``gguf.constants``'
TENSOR_NAMES), the converter's weight transforms (q/k row permutation, Gemma's ``1 + w`` norms)
and the metadata keys of the architectures whose HF config Stencil builds itself (transformers'
GGUF config reader misses their sliding windows, soft-caps, partial rotary and multipliers)."""

from __future__ import annotations

import numpy as np

from stencil.engine.errors import ConfigError

# llama.cpp tensor names -> HF names (per layer: blk.{i}.<key>), the Llama layout
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_qkv": "self_attn.qkv_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_SANDWICH = {  # Gemma 2/3: a norm after attention and one each side of the MLP
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
ARCH_LAYER_NAMES = {
    "gemma2": {**LAYER_NAMES, **_SANDWICH},
    "gemma3": {**LAYER_NAMES, **_SANDWICH},
    "olmo2": {
        **LAYER_NAMES,
        "post_attention_norm": "post_attention_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
    },
    "phi3": {**LAYER_NAMES, "ffn_up": "mlp.gate_up_proj"},  # gate and up stored fused
}
GLOBAL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
# the converter interleaves the rotary halves of q/k rows for these architectures
PERMUTED_ARCHS = ("llama", "mistral", "granite", "smollm3")
# the converter stores Gemma's RMSNorm weights with the 1 added
NORM_SHIFT_ARCHS = ("gemma2", "gemma3")
# GGUF architecture -> HF model type, for the configs built here
OWN_CONFIGS = {
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "olmo2": "olmo2",
    "granite": "granite",
    "smollm3": "smollm3",
}


# built here too where the file does not scale its rope: transformers' reader gives the same
# config but reads the whole file for it (~10 s for a 0.5B)
PLAIN_CONFIGS = {"qwen2": "qwen2"}


def builds_config(arch: str, meta: dict) -> bool:
    """Whether ``hf_config`` builds this file's config (else transformers' GGUF reader does)."""
    return arch in OWN_CONFIGS or (
        arch in PLAIN_CONFIGS and f"{arch}.rope.scaling.type" not in meta
    )


def layer_names(arch: str) -> dict[str, str]:
    return ARCH_LAYER_NAMES.get(arch, LAYER_NAMES)


def to_hf_convention(arch: str, hf_name: str, data):
    """A float tensor as the HF checkpoint holds it (Gemma's norms without the added 1)."""
    if arch in NORM_SHIFT_ARCHS and hf_name.endswith("norm.weight"):
        return data - 1
    return data


def hf_config(arch: str, meta: dict, tensors: dict[str, np.ndarray]) -> dict | None:
    """The HF config (as a dict) of a file whose architecture Stencil reads itself, else None.
    ``meta``: the file's metadata; ``tensors``: its small float tensors (LongRoPE factors)."""
    model_type = OWN_CONFIGS.get(arch) or PLAIN_CONFIGS.get(arch)
    if model_type is None:
        return None

    def get(key: str, default=None):
        return meta.get(f"{arch}.{key}", default)

    heads = int(get("attention.head_count"))
    hidden = int(get("embedding_length"))
    layers = int(get("block_count"))
    head_dim = int(get("attention.key_length", hidden // heads))
    tokens = meta["tokenizer.ggml.tokens"]  # the array's length where it was not read
    vocab = get("vocab_size") or (tokens if isinstance(tokens, int) else len(tokens))
    cfg = {
        "model_type": model_type,
        "vocab_size": int(vocab),
        "hidden_size": hidden,
        "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": int(get("attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "max_position_embeddings": int(get("context_length")),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")),
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    }
    theta = float(get("rope.freq_base", 10000.0))
    rope = {"rope_type": "default", "rope_theta": theta}
    scaling = get("rope.scaling.type")
    if scaling == "linear":
        rope = {
            "rope_type": "linear",
            "rope_theta": theta,
            "factor": float(get("rope.scaling.factor")),
        }
    elif scaling not in (None, "none", "longrope"):
        raise ConfigError(f"GGUF {arch}: rope scaling {scaling!r} is not supported")
    window = get("attention.sliding_window")
    if arch in ("gemma2", "gemma3"):
        # llama.cpp: 1/sqrt(head_dim), but hidden / heads for the 27B models
        big = layers == (46 if arch == "gemma2" else 62)
        cfg["query_pre_attn_scalar"] = hidden // heads if big else head_dim
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
        cfg["sliding_window"] = int(window or 4096)
        cfg["layer_types"] = _swa_layer_types(get, layers, 2 if arch == "gemma2" else 6)
        cfg["final_logit_softcapping"] = get("final_logit_softcapping")
        if arch == "gemma2":
            cfg["attn_logit_softcapping"] = get("attn_logit_softcapping")
            cfg["rope_parameters"] = rope
        else:
            local = {"rope_type": "default", "rope_theta": float(get("rope.freq_base_swa", 1e4))}
            cfg["rope_parameters"] = {"full_attention": rope, "sliding_attention": local}
        return cfg
    if arch == "phi3":
        rope["partial_rotary_factor"] = int(get("rope.dimension_count", head_dim)) / head_dim
        if "rope_factors_long" in tensors:
            original = int(get("rope.scaling.original_context_length"))
            rope.update(
                rope_type="longrope",
                long_factor=[float(x) for x in tensors["rope_factors_long"]],
                short_factor=[float(x) for x in tensors["rope_factors_short"]],
                original_max_position_embeddings=original,
                attention_factor=float(get("rope.scaling.attn_factor", 1.0)),
            )
            cfg["original_max_position_embeddings"] = original
        cfg["sliding_window"] = int(window) if window else None
    elif arch == "granite":
        cfg["embedding_multiplier"] = float(get("embedding_scale", 1.0))
        cfg["residual_multiplier"] = float(get("residual_scale", 1.0))
        cfg["attention_multiplier"] = float(get("attention.scale", head_dim**-0.5))
        cfg["logits_scaling"] = float(get("logit_scale", 1.0))
    elif window:
        raise ConfigError(f"GGUF {arch}: attention.sliding_window is not supported")
    cfg["rope_parameters"] = rope
    return cfg


def _swa_layer_types(get, layers: int, default_pattern: int) -> list[str]:
    """llama.cpp's ``set_swa_pattern``: layer i slides when ``i % n < n - 1`` (or per-layer flags)."""
    pattern = get("attention.sliding_window_pattern", default_pattern)
    if isinstance(pattern, list):
        flags = [bool(p) for p in pattern]
    else:
        n = int(pattern)
        flags = [n > 1 and i % n < n - 1 for i in range(layers)]
    return ["sliding_attention" if f else "full_attention" for f in flags]
