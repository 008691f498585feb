"""Gemma 2 and Gemma 3 (text): norms before and after attention and the MLP (a "sandwich"),
GeGLU, the embedding scaled by sqrt(hidden), scores scaled by ``query_pre_attn_scalar``,
alternating sliding-window layers. Gemma 2 soft-caps the attention scores and the logits; Gemma 3
has q/k norms and a rotary base of its own on the sliding layers.

Gemma's RMSNorm multiplies by ``1 + weight``: the loader adds the 1 to HF weights (llama.cpp's
converter already stores it added), so the norms here are the plain ones."""

from __future__ import annotations

from torch import nn

from stencil.engine.errors import ConfigError
from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.layers import MLP, Attention, AttentionSpec, RMSNorm, head_dim
from stencil.kernels import Kernels

GEMMA_TYPES = ("gemma2", "gemma3_text")


class GemmaDecoderLayer(nn.Module):
    def __init__(self, config, spec: AttentionSpec) -> None:
        super().__init__()
        eps, hidden = config.rms_norm_eps, config.hidden_size
        self.self_attn = Attention(config, spec)
        self.mlp = MLP(config, config.hidden_activation)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.pre_feedforward_layernorm = RMSNorm(hidden, eps)
        self.post_feedforward_layernorm = RMSNorm(hidden, eps)

    def forward(self, rope, hidden, residual, kv_cache, meta, ops: Kernels):
        """``(hidden, residual)`` in and out: the layer's input is their sum."""
        hidden, residual = self.input_layernorm(hidden, ops, residual)
        hidden = self.self_attn(rope, hidden, kv_cache, meta, ops)
        hidden = self.post_attention_layernorm(hidden, ops)[0]
        hidden, residual = self.pre_feedforward_layernorm(hidden, ops, residual)
        hidden = self.mlp(hidden, ops)
        return self.post_feedforward_layernorm(hidden, ops)[0], residual


class GemmaForCausalLM(DecoderForCausalLM):
    def __init__(self, config, max_positions: int) -> None:
        if config.model_type not in GEMMA_TYPES:
            raise ConfigError(f"GemmaForCausalLM does not run model type {config.model_type!r}")
        if getattr(config, "use_bidirectional_attention", False):
            raise ConfigError("config field use_bidirectional_attention=True is not supported")
        self.embed_scale = config.hidden_size**0.5
        self.logit_softcap = getattr(config, "final_logit_softcapping", None)
        super().__init__(config, max_positions)

    def rope_types(self) -> dict[str, str | None]:
        if self.config.model_type == "gemma3_text":  # one table per layer type
            return {t: t for t in sorted(set(self.config.layer_types))}
        return {"default": None}

    def make_layer(self, config, index: int) -> nn.Module:
        layer_type = config.layer_types[index]
        sliding = layer_type == "sliding_attention"
        gemma3 = config.model_type == "gemma3_text"
        spec = AttentionSpec(
            scale=config.query_pre_attn_scalar**-0.5,
            rope=layer_type if gemma3 else "default",
            rotary_dim=head_dim(config),
            sliding_window=config.sliding_window if sliding else None,
            softcap=getattr(config, "attn_logit_softcapping", None),
            qk_norm="head" if gemma3 else None,
            qkv_bias=bool(config.attention_bias),
            o_bias=bool(config.attention_bias),
        )
        return GemmaDecoderLayer(config, spec)
