"""Tiny random-weight configs of the dense families beyond Llama (one per family variant) for the
numerics tests: sliding windows of 8 tokens (prompts of 30 exceed them), every config field that
changes the math set away from its neutral value."""

from __future__ import annotations

import json
from pathlib import Path

from stencil.testing.tiny_models import build_tiny_model, tiny

WINDOW = 8

DENSE_BUILDERS = {
    # two sliding layers (own rotary base) then a full one with linear rope scaling; head_dim 32
    "gemma3": tiny(
        "Gemma3TextConfig",
        num_hidden_layers=3,
        rms_norm_eps=1e-6,
        head_dim=32,
        query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        },
        tie_word_embeddings=True,
    ),
    "gemma2-softcap": tiny(
        "Gemma2Config",
        num_hidden_layers=3,
        head_dim=16,
        query_pre_attn_scalar=20,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        attn_logit_softcapping=2.0,
        final_logit_softcapping=0.8,
        tie_word_embeddings=True,
    ),
    # Phi-4-mini's shape: partial rotary (half of head_dim 16) and LongRoPE past 16 positions
    "phi3-partial-longrope": tiny(
        "Phi3Config",
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
    ),
    "olmo2": tiny("Olmo2Config", tie_word_embeddings=False),
    "granite": tiny(
        "GraniteConfig",
        embedding_multiplier=6.0,
        residual_multiplier=0.5,
        attention_multiplier=0.1,
        logits_scaling=4.0,
        tie_word_embeddings=True,
    ),
    # layer 3 has no rotary (no_rope_layers' default: every fourth); it slides over 8 tokens
    "smollm3-nope": tiny(
        "SmolLM3Config",
        num_hidden_layers=4,
        use_sliding_window=True,
        sliding_window=WINDOW,
        tie_word_embeddings=True,
    ),
}


def build_base_model(out: Path, tokenizer_src: Path, config=None) -> Path:
    """A tiny random-weight base model (``config`` or a tiny Gemma 3) saved without a chat
    template: its tokenizer as ``tokenizer_src``'s, less the template."""
    build_tiny_model("gemma3", out, tokenizer_src, config or DENSE_BUILDERS["gemma3"]())
    (out / "chat_template.jinja").unlink(missing_ok=True)
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return out
