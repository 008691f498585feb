"""OLMo 2: no norm before attention or the MLP, one after each (before the residual add), and
q/k norms over the whole projection (all heads at once)."""

from __future__ import annotations

from torch import nn

from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.layers import MLP, Attention, AttentionSpec, RMSNorm, head_dim
from stencil.kernels import Kernels


class Olmo2DecoderLayer(nn.Module):
    def __init__(self, config, spec: AttentionSpec) -> None:
        super().__init__()
        self.self_attn = Attention(config, spec)
        self.mlp = MLP(config, config.hidden_act)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_feedforward_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, rope, hidden, residual, kv_cache, meta, ops: Kernels):
        """``(hidden, residual)`` in and out: the layer's input is their sum."""
        x = hidden if residual is None else residual.add_(hidden)  # [T, hidden]
        attn = self.self_attn(rope, x, kv_cache, meta, ops)
        x = x + self.post_attention_layernorm(attn, ops)[0]
        return self.post_feedforward_layernorm(self.mlp(x, ops), ops)[0], x


class Olmo2ForCausalLM(DecoderForCausalLM):
    def make_layer(self, config, index: int) -> nn.Module:
        window = getattr(config, "sliding_window", None)
        spec = AttentionSpec(
            scale=head_dim(config) ** -0.5,
            rope="default",
            rotary_dim=head_dim(config),
            sliding_window=window,
            qk_norm="proj",
            qkv_bias=bool(config.attention_bias),
            o_bias=bool(config.attention_bias),
        )
        return Olmo2DecoderLayer(config, spec)
