"""Tiny random-weight configs of the dense families beyond Llama (one per family variant) for the
numerics tests: sliding windows of 8 tokens (prompts of 30 exceed them), every config field that
changes the math set away from its neutral value."""

from __future__ import annotations

from stencil.testing.tiny_models import _COMMON

WINDOW = 8


def _gemma3():
    from transformers import Gemma3TextConfig

    # two sliding layers (own rotary base) then a full one with linear rope scaling; head_dim 32
    return Gemma3TextConfig(
        **{**_COMMON, "num_hidden_layers": 3, "rms_norm_eps": 1e-6},
        head_dim=32,
        query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        },
        tie_word_embeddings=True,
    )


def _gemma2():
    from transformers import Gemma2Config

    return Gemma2Config(
        **{**_COMMON, "num_hidden_layers": 3},
        head_dim=16,
        query_pre_attn_scalar=20,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        attn_logit_softcapping=2.0,
        final_logit_softcapping=0.8,
        tie_word_embeddings=True,
    )


def _phi3():
    from transformers import Phi3Config

    # Phi-4-mini's shape: partial rotary (half of head_dim 16) and LongRoPE past 16 positions
    return Phi3Config(
        **_COMMON,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 1.2, 1.5, 2.0],
            "long_factor": [1.5, 2.0, 3.0, 5.0],
            "original_max_position_embeddings": 16,
        },
        original_max_position_embeddings=16,
        tie_word_embeddings=False,
    )


def _olmo2():
    from transformers import Olmo2Config

    return Olmo2Config(**_COMMON, tie_word_embeddings=False)


def _granite():
    from transformers import GraniteConfig

    return GraniteConfig(
        **_COMMON,
        embedding_multiplier=6.0,
        residual_multiplier=0.5,
        attention_multiplier=0.1,
        logits_scaling=4.0,
        tie_word_embeddings=True,
    )


def _smollm3():
    from transformers import SmolLM3Config

    # layer 3 has no rotary (no_rope_layers' default: every fourth); it slides over 8 tokens
    return SmolLM3Config(
        **{**_COMMON, "num_hidden_layers": 4},
        use_sliding_window=True,
        sliding_window=WINDOW,
        tie_word_embeddings=True,
    )


DENSE_BUILDERS = {
    "gemma3": _gemma3,
    "gemma2-softcap": _gemma2,
    "phi3-partial-longrope": _phi3,
    "olmo2": _olmo2,
    "granite": _granite,
    "smollm3-nope": _smollm3,
}
