"""The building blocks every decoder family shares: RMSNorm, attention over the paged cache and the
gated MLP, each configured by a spec the family reads from its HF config.

Our own model code, because attention must read the paged cache; weights keep HF names (q/k/v and
gate/up fused into ``qkv_proj`` / ``gate_up_proj`` at load).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from stencil.engine.attention import AttentionMetadata
from stencil.engine.errors import ConfigError
from stencil.kernels import Kernels


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


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


@dataclass(frozen=True, slots=True)
class AttentionSpec:
    """One layer's attention, as its family's config defines it."""

    scale: float  # applied to q.k
    rope: str | None  # which of the model's rotary tables (None: no rotary, SmolLM3's NoPE layers)
    rotary_dim: int  # leading dims of each head that rotate (Phi-4-mini: 3/4 of head_dim)
    sliding_window: int | None = None
    softcap: float | None = None  # Gemma 2: scores = softcap * tanh(scores / softcap)
    qk_norm: str | None = None  # "head" (Qwen3, Gemma 3) | "proj" (OLMo 2: whole projection)
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False  # GPT-OSS: a learned logit per head joins every softmax's denominator


class Attention(nn.Module):
    def __init__(self, config, spec: AttentionSpec) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.dim = head_dim(config)
        self.spec = spec
        self.sliding_window = spec.sliding_window
        self.qkv_proj = nn.Linear(
            config.hidden_size, (self.heads + 2 * self.kv_heads) * self.dim, bias=spec.qkv_bias
        )
        self.o_proj = nn.Linear(self.heads * self.dim, config.hidden_size, bias=spec.o_bias)
        self.sinks = nn.Parameter(torch.empty(self.heads)) if spec.sinks else None
        if spec.qk_norm is not None:
            per = 1 if spec.qk_norm == "head" else self.heads
            self.q_norm = RMSNorm(self.dim * per, config.rms_norm_eps)
            self.k_norm = RMSNorm(
                self.dim * (1 if per == 1 else self.kv_heads), config.rms_norm_eps
            )

    def forward(self, rope: dict, x, kv_cache, meta: AttentionMetadata, ops: Kernels):
        """``rope``: rotary table name -> (positions [T], cos_sin table), built once per step."""
        t, spec = x.shape[0], self.spec
        qkv = ops.linear(x, self.qkv_proj.weight, self.qkv_proj.bias)
        q, k, v = qkv.split(
            [self.heads * self.dim, self.kv_heads * self.dim, self.kv_heads * self.dim], -1
        )
        if spec.qk_norm == "proj":  # [T, heads * dim], in place
            ops.rms_norm(q, q, self.q_norm.weight, self.q_norm.eps)
            ops.rms_norm(k, k, self.k_norm.weight, self.k_norm.eps)
        q = q.view(t, self.heads, self.dim)  # [T, heads, dim]
        k = k.view(t, self.kv_heads, self.dim)  # [T, kv_heads, dim]
        v = v.view(t, self.kv_heads, self.dim)
        if spec.qk_norm == "head":  # per head, in place
            ops.rms_norm(q, q, self.q_norm.weight, self.q_norm.eps)
            ops.rms_norm(k, k, self.k_norm.weight, self.k_norm.eps)
        if spec.rope is not None:
            positions, cos_sin = rope[spec.rope]
            r = spec.rotary_dim
            if r == self.dim:
                ops.rotary_embedding(positions, q, k, cos_sin)
            else:  # partial rotary: the leading r dims of each head
                ops.rotary_embedding(positions, q[..., :r], k[..., :r], cos_sin)
        if spec.sliding_window is not None and meta.sliding is not None:
            meta = meta.sliding  # the sliding-window pool's slots and tables
        k_cache, v_cache = kv_cache
        ops.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        extra = {"softcap": spec.softcap} if spec.softcap is not None else {}
        if self.sinks is not None:
            extra["sinks"] = self.sinks
        o = ops.paged_attention(
            q,
            k_cache,
            v_cache,
            meta.block_tables,
            meta.cu_seqlens_q,
            meta.context_lens,
            spec.scale,
            spec.sliding_window,
            plan=meta.plan,
            **extra,
        )
        return ops.linear(o.reshape(t, self.heads * self.dim), self.o_proj.weight, self.o_proj.bias)


ACTIVATIONS = ("silu", "gelu_pytorch_tanh")


class MLP(nn.Module):
    """``down(act(gate(x)) * up(x))``, gate and up fused into one projection."""

    def __init__(self, config, act: str = "silu", bias: bool = False) -> None:
        super().__init__()
        if act not in ACTIVATIONS:
            raise ConfigError(f"unsupported hidden activation {act!r}; supported: {ACTIVATIONS}")
        self.inter = config.intermediate_size
        self.act = act
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * self.inter, bias=bias)
        self.down_proj = nn.Linear(self.inter, config.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, ops: Kernels) -> torch.Tensor:
        gate_up = ops.linear(x, self.gate_up_proj.weight, self.gate_up_proj.bias)  # [T, 2 * inter]
        if self.act == "silu":
            act = gate_up.new_empty(x.shape[0], self.inter)
            ops.silu_and_mul(act, gate_up)
        else:  # GeGLU (Gemma)
            gate, up = gate_up.split(self.inter, -1)
            act = F.gelu(gate, approximate="tanh").mul_(up)
        return ops.linear(act, self.down_proj.weight, self.down_proj.bias)


def rope_inv_freq(config, layer_type: str | None = None) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling for the config's rope type (default, llama3,
    yarn, linear, longrope's short factors, ...); ``layer_type`` picks a per-layer-type entry
    (Gemma 3's sliding and full layers)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = rope_parameters(config, layer_type)
    rope_type = params.get("rope_type", "default")
    if rope_type == "default":
        dim = int(head_dim(config) * params.get("partial_rotary_factor", 1.0))
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float(), 1.0
    if rope_type == "dynamic" or rope_type not in ROPE_INIT_FUNCTIONS:
        raise ConfigError(f"unsupported rope type {rope_type!r}")
    kw = {} if layer_type is None else {"layer_type": layer_type}
    inv, factor = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"), **kw)
    return inv.float(), float(factor)


def rope_parameters(config, layer_type: str | None = None) -> dict:
    params = getattr(config, "rope_parameters", None) or {}
    if layer_type is not None:
        params = params.get(layer_type) or {}
    return params


def rope_table(inv_freq: torch.Tensor, attn_factor: float, positions: int) -> torch.Tensor:
    """``[positions, rotary_dim]`` float32: ``[cos | sin]`` of the frequencies, times the factor."""
    freqs = torch.outer(torch.arange(positions, dtype=torch.float32), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1) * attn_factor


def set_weight(module: nn.Linear, weight) -> None:
    """A packed tensor stays a parameter; a packed object of a kernel's own replaces it."""
    if isinstance(weight, torch.Tensor):
        module.weight = nn.Parameter(weight, requires_grad=False)
    else:
        del module.weight
        module.weight = weight
