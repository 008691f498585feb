"""The Llama-shaped decoder: a norm before attention and before the MLP, residual adds after each.

One class for the families of that shape, each read from its own config: Llama 2/3, Qwen2/2.5,
Qwen3 (q/k norms per head), Mistral, SmolLM2, SmolLM3 (no rotary on its NoPE layers), Phi-3 /
Phi-3.5 / Phi-4-mini (fused weights, partial rotary, LongRoPE), Granite (embedding, residual,
attention and logit multipliers), and the mixture-of-experts families whose MLP ``make_mlp`` swaps
for a ``SparseMoeBlock`` (Qwen2/Qwen3-MoE, Mixtral, GPT-OSS with its attention sinks).
"""

from __future__ import annotations

from torch import nn

from stencil.engine.errors import ConfigError
from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.layers import MLP, Attention, AttentionSpec, RMSNorm, head_dim
from stencil.engine.models.layers import rope_parameters as _rope_parameters
from stencil.engine.models.moe import SparseMoeBlock, is_sparse_layer, moe_spec
from stencil.kernels import Kernels


class DecoderLayer(nn.Module):
    def __init__(self, config, spec: AttentionSpec, mlp: nn.Module, residual_scale=None) -> None:
        super().__init__()
        self.self_attn = Attention(config, spec)
        self.mlp = mlp
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.residual_scale = residual_scale  # Granite's residual_multiplier

    def forward(self, rope, hidden, residual, kv_cache, meta, ops: Kernels):
        """``(hidden, residual)`` in and out (vLLM's layout): the layer's input is their sum."""
        hidden, residual = self.input_layernorm(hidden, ops, residual)
        hidden = self.self_attn(rope, hidden, kv_cache, meta, ops)
        if self.residual_scale is not None:
            hidden.mul_(self.residual_scale)
        hidden, residual = self.post_attention_layernorm(hidden, ops, residual)
        hidden = self.mlp(hidden, ops)
        if self.residual_scale is not None:
            hidden.mul_(self.residual_scale)
        return hidden, residual


class LlamaForCausalLM(DecoderForCausalLM):
    """Llama, Qwen2, Qwen3, Mistral, SmolLM2/3, Phi-3, Granite (see the module docstring)."""

    def __init__(self, config, max_positions: int) -> None:
        check_config(config)
        if config.model_type == "granite":
            self.embed_scale = float(config.embedding_multiplier)
            self.logit_scale = float(config.logits_scaling)
        super().__init__(config, max_positions)

    def make_layer(self, config, index: int) -> nn.Module:
        scale = config.residual_multiplier if config.model_type == "granite" else None
        return DecoderLayer(
            config, attention_spec(config, index), self.make_mlp(config, index), scale
        )

    def make_mlp(self, config, index: int) -> nn.Module:
        spec = moe_spec(config)
        if spec is not None and is_sparse_layer(config, index):
            return SparseMoeBlock(config, spec)
        return MLP(config, config.hidden_act, bool(getattr(config, "mlp_bias", False)))


def attention_spec(config, index: int) -> AttentionSpec:
    """Layer ``index``'s attention as a Llama-shaped family's config defines it."""
    mt = config.model_type
    dim = head_dim(config)
    params = _rope_parameters(config)
    partial = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    rope = "default"
    if mt == "smollm3" and not config.no_rope_layers[index]:
        rope = None
    bias = bool(getattr(config, "attention_bias", False))
    return AttentionSpec(
        scale=float(config.attention_multiplier) if mt == "granite" else dim**-0.5,
        rope=rope,
        rotary_dim=int(dim * partial),
        sliding_window=layer_sliding_windows(config)[index],
        qk_norm="head" if mt in ("qwen3", "qwen3_moe") else None,
        qkv_bias=bias or mt == "qwen2" or bool(getattr(config, "qkv_bias", False)),
        o_bias=bias,
        sinks=mt == "gpt_oss",
    )


def check_config(config) -> None:
    """Config fields that change the math and that Stencil does not implement: a ConfigError."""
    for name in (
        "use_bidirectional_attention",
        "attn_logit_softcapping",
        "final_logit_softcapping",
    ):
        value = getattr(config, name, None)
        if value is not None and value is not False:
            raise ConfigError(
                f"config field {name}={value!r} is not supported for {config.model_type}"
            )


def layer_sliding_windows(config) -> list[int | None]:
    """The sliding window of each layer (None = full attention)."""
    n = config.num_hidden_layers
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if config.model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "smollm3"):
        if not getattr(config, "use_sliding_window", False):
            return [None] * n
    if not window:
        return [None] * n
    if types:
        return [window if t == "sliding_attention" else None for t in types]
    return [window] * n
