"""Tiny random-weight mixture-of-experts configs (one per family variant) for the numerics tests:
more experts than a decode step has rows, so several experts receive no token in most steps."""

from __future__ import annotations

from stencil.testing.tiny_models import tiny

MOE_BUILDERS = {
    # a shared expert behind its sigmoid gate; layer 1 dense (mlp_only_layers); no renormalising
    "qwen2-moe-shared": tiny(
        "Qwen2MoeConfig",
        num_hidden_layers=3,
        num_experts=16,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        norm_topk_prob=False,
        mlp_only_layers=[1],
        tie_word_embeddings=False,
    ),
    "qwen3-moe": tiny(
        "Qwen3MoeConfig",
        head_dim=32,
        num_experts=16,
        num_experts_per_tok=4,
        moe_intermediate_size=32,
        norm_topk_prob=True,
        tie_word_embeddings=False,
    ),
    "mixtral-swa8": tiny(
        "MixtralConfig", num_local_experts=8, num_experts_per_tok=2, sliding_window=8
    ),
    # alternating 8-token sliding window, YaRN, sinks, biases, a SwiGLU limit low enough to clamp
    "gpt-oss": tiny(
        "GptOssConfig",
        num_hidden_layers=3,
        head_dim=16,
        num_local_experts=16,
        num_experts_per_tok=4,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        swiglu_limit=1.0,
        attention_bias=True,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 64,
        },
        tie_word_embeddings=False,
    ),
}


def gguf_twin_config(name: str):
    """``MOE_BUILDERS[name]()`` as a GGUF file can state it: llama.cpp's Mixtral has no sliding
    window and GPT-OSS's SwiGLU limit is fixed at 7."""
    config = MOE_BUILDERS[name]()
    if config.model_type == "mixtral":
        config.sliding_window = None
    if config.model_type == "gpt_oss":
        config.swiglu_limit = 7.0
    return config


def round_trip_experts(state: dict, qtype: str) -> dict:
    """``state`` (HF names -> float32 arrays) with every expert weight replaced by its ``qtype``
    blocks dequantized (along the rows the GGUF file stores): the weights a GGUF twin holds."""
    import re

    import gguf
    import numpy as np

    kind = gguf.GGMLQuantizationType[qtype]

    def rt(rows: np.ndarray) -> np.ndarray:  # [..., K], quantized along K
        flat = rows.reshape(-1, rows.shape[-1]).astype(np.float32)
        return gguf.quants.dequantize(gguf.quants.quantize(flat, kind), kind).reshape(rows.shape)

    out = {}
    for name, w in state.items():
        if re.search(r"experts\.\d+\.\w+\.weight$", name):
            w = rt(w)
        elif name.endswith(("experts.gate_up_proj", "experts.down_proj")):  # GPT-OSS [E, in, out]
            w = rt(w.transpose(0, 2, 1)).transpose(0, 2, 1)
        out[name] = np.ascontiguousarray(w)
    return out
