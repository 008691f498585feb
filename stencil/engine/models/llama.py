"""Llama-family decoder (Llama 2/3, Qwen2/2.5, Qwen3, Mistral, SmolLM2) reading a paged KV cache.

Our own model code, because attention must read the paged cache; weights keep HF names.
"""

from __future__ import annotations

import torch
from torch import nn

from stencil.engine.attention import AttentionMetadata
from stencil.engine.errors import ConfigError
from stencil.engine.models.moe import SparseMoeBlock, is_sparse_layer, moe_spec
from stencil.kernels import Kernels
from stencil.kernels.quant_weight import is_quantized


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(
        self, x: torch.Tensor, ops: Kernels, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """vLLM's residual passing: without a residual, ``(norm(x), x)``; with one, ``residual +=
        x`` and ``x = norm(residual)`` in place, returning ``(x, residual)``."""
        if residual is None:
            out = torch.empty_like(x)
            ops.rms_norm(out, x, self.weight, self.eps)
            return out, x
        ops.fused_add_rms_norm(x, residual, self.weight, self.eps)
        return x, residual


def rope_inv_freq(config) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling for the config's rope type (default, llama3, ...)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = getattr(config, "rope_parameters", None) or {}
    rope_type = params.get("rope_type", "default")
    if rope_type == "default":
        dim = head_dim(config)
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float(), 1.0
    if rope_type == "dynamic" or rope_type not in ROPE_INIT_FUNCTIONS:
        raise ConfigError(f"unsupported rope type {rope_type!r}")
    inv, factor = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"))
    return inv.float(), float(factor)


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


class Attention(nn.Module):
    def __init__(self, config, sliding_window: int | None) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.dim = head_dim(config)
        o_bias = bool(getattr(config, "attention_bias", False))
        bias = o_bias or config.model_type == "qwen2" or bool(getattr(config, "qkv_bias", False))
        self.qkv_proj = nn.Linear(
            config.hidden_size, (self.heads + 2 * self.kv_heads) * self.dim, bias=bias
        )
        self.o_proj = nn.Linear(self.heads * self.dim, config.hidden_size, bias=o_bias)
        # GPT-OSS: a learned logit per head that joins every softmax's denominator
        self.sinks = (
            nn.Parameter(torch.empty(self.heads)) if config.model_type == "gpt_oss" else None
        )
        self.qk_norm = config.model_type in ("qwen3", "qwen3_moe")
        if self.qk_norm:
            self.q_norm = RMSNorm(self.dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.dim, config.rms_norm_eps)
        self.scale = self.dim**-0.5
        self.sliding_window = sliding_window

    def forward(self, positions, x, cos_sin, kv_cache, meta: AttentionMetadata, ops: Kernels):
        t = x.shape[0]
        qkv = ops.linear(x, self.qkv_proj.weight, self.qkv_proj.bias)
        q, k, v = qkv.split(
            [self.heads * self.dim, self.kv_heads * self.dim, self.kv_heads * self.dim], -1
        )
        q = q.view(t, self.heads, self.dim)  # [T, heads, dim]
        k = k.view(t, self.kv_heads, self.dim)  # [T, kv_heads, dim]
        v = v.view(t, self.kv_heads, self.dim)
        if self.qk_norm:  # per head, in place
            ops.rms_norm(q, q, self.q_norm.weight, self.q_norm.eps)
            ops.rms_norm(k, k, self.k_norm.weight, self.k_norm.eps)
        ops.rotary_embedding(positions, q, k, cos_sin)
        k_cache, v_cache = kv_cache
        ops.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        o = ops.paged_attention(
            q,
            k_cache,
            v_cache,
            meta.block_tables,
            meta.cu_seqlens_q,
            meta.context_lens,
            self.scale,
            self.sliding_window,
            plan=meta.plan,
            sinks=self.sinks,
        )
        return ops.linear(o.reshape(t, self.heads * self.dim), self.o_proj.weight, self.o_proj.bias)


class MLP(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.inter = config.intermediate_size
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * self.inter, bias=False)
        self.down_proj = nn.Linear(self.inter, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, ops: Kernels) -> torch.Tensor:
        gate_up = ops.linear(x, self.gate_up_proj.weight)  # [T, 2 * inter]
        act = gate_up.new_empty(x.shape[0], self.inter)
        ops.silu_and_mul(act, gate_up)
        return ops.linear(act, self.down_proj.weight)


class DecoderLayer(nn.Module):
    def __init__(self, config, sliding_window: int | None, index: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, sliding_window)
        spec = moe_spec(config)
        sparse = spec is not None and is_sparse_layer(config, index)
        self.mlp = SparseMoeBlock(config, spec) if sparse else MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, positions, hidden, residual, cos_sin, kv_cache, meta, ops: Kernels):
        """``(hidden, residual)`` in and out (vLLM's layout): the layer's input is their sum."""
        hidden, residual = self.input_layernorm(hidden, ops, residual)
        hidden = self.self_attn(positions, hidden, cos_sin, kv_cache, meta, ops)
        hidden, residual = self.post_attention_layernorm(hidden, ops, residual)
        return self.mlp(hidden, ops), residual


class LlamaForCausalLM(nn.Module):
    """Forward over a flat batch of the step's tokens; logits only for the rows asked for.

    Built on the meta device by the loader; ``init_rope()`` runs once the weights are real.
    """

    def __init__(self, config, max_positions: int) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        windows = layer_sliding_windows(config)
        self.layers = nn.ModuleList(DecoderLayer(config, w, i) for i, w in enumerate(windows))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.tie = bool(getattr(config, "tie_word_embeddings", False))
        if not self.tie:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.max_positions = max_positions

    def init_rope(self) -> None:
        """(Re)build the rotary table ``cos_sin_cache [max_positions, head_dim]`` (float32,
        ``[cos | sin]`` of the head_dim / 2 frequencies, times the rope type's attention factor);
        call after moving a meta-initialised model to a device."""
        device = self.norm.weight.device
        inv_freq, attn_factor = rope_inv_freq(self.config)
        freqs = torch.outer(torch.arange(self.max_positions, dtype=torch.float32), inv_freq)
        table = torch.cat((freqs.cos(), freqs.sin()), dim=-1) * attn_factor
        self.register_buffer("cos_sin_cache", table.to(device), persistent=False)

    def forward(
        self, input_ids, positions, kv_caches, meta: AttentionMetadata, ops: Kernels
    ) -> torch.Tensor:
        hidden = self.embed(input_ids)  # [T, hidden]
        residual = None
        for layer, kv in zip(self.layers, kv_caches, strict=True):
            hidden, residual = layer(positions, hidden, residual, self.cos_sin_cache, kv, meta, ops)
        return self.norm(hidden, ops, residual)[0]  # [T, hidden]

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        weight = self.embed_tokens.weight
        if is_quantized(weight):  # rows dequantized from the kept codes
            return weight.rows(input_ids, self.norm.weight.dtype)
        return self.embed_tokens(input_ids)

    def pack_linear_weights(self, pack) -> None:
        """Swap every projection weight for ``pack(weight)`` (a kernel set's own layout); a tied
        lm_head gets a packed copy of its own, the embedding keeps the plain one. Quantized
        weights are already in their kernel's layout: kept as they are (a quantized tied
        embedding serves both)."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and isinstance(module.weight, torch.Tensor):
                _set_weight(module, pack(module.weight))
        if self.tie and isinstance(self.embed_tokens.weight, torch.Tensor):
            self.lm_head = nn.Linear(
                self.config.hidden_size, self.config.vocab_size, bias=False, device="meta"
            )
            _set_weight(self.lm_head, pack(self.embed_tokens.weight))
            self.tie = False

    def compute_logits(self, hidden: torch.Tensor, ops: Kernels) -> torch.Tensor:
        weight = self.embed_tokens.weight if self.tie else self.lm_head.weight
        return ops.linear(hidden.contiguous(), weight).float()  # [rows, vocab]


def _set_weight(module: nn.Linear, weight) -> None:
    """A packed tensor stays a parameter; a packed object of a kernel's own replaces it."""
    if isinstance(weight, torch.Tensor):
        module.weight = nn.Parameter(weight, requires_grad=False)
    else:
        del module.weight
        module.weight = weight


def layer_sliding_windows(config) -> list[int | None]:
    """The sliding window of each layer (None = full attention)."""
    n = config.num_hidden_layers
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if config.model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not getattr(config, "use_sliding_window", False):
            return [None] * n
    if not window:
        return [None] * n
    if types:
        return [window if t == "sliding_attention" else None for t in types]
    return [window] * n
