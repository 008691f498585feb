"""The forward of a plain Llama-shaped model with quantized weights as one C call over its layers
(``kernels.cpu_layer_loop``): the same kernels in the same order as the Python layers, so the
hidden states are identical, without the Python glue around each op (at one row, a decode step's
kernels run for a few ms and the glue around their ~300 calls cost about as much again).

``build`` returns None for anything the loop does not cover (other layer or MLP classes, q/k
norms, partial or per-layer rotary, sliding windows, soft-caps, sinks, Granite's multipliers,
LongRoPE, dense or padded weights, non-fp32 activations or caches); the engine then runs the model's
own forward.
"""

from __future__ import annotations

import torch

from stencil.engine.attention import AttentionMetadata
from stencil.engine.models.layers import MLP, Attention
from stencil.engine.models.llama import DecoderLayer, LlamaForCausalLM
from stencil.kernels import Kernels
from stencil.kernels.cpu_layer_loop import LayerLoop, LayerWeights, Stack


class FusedForward:
    """``model.forward``'s signature and result; installed as the model's ``forward`` (its hooks
    still run). Calls with other kernels or caches than it was built for go to the class's own
    forward (tests swap in the torch twins)."""

    def __init__(self, model, loop: LayerLoop, stack: Stack, kv_caches) -> None:
        self.model, self.loop, self.stack, self.kv_caches = model, loop, stack, kv_caches

    def __call__(
        self, input_ids, positions, kv_caches, meta: AttentionMetadata, ops: Kernels
    ) -> torch.Tensor:
        model = self.model
        if ops.layer_loop is not self.loop or kv_caches is not self.kv_caches:
            return type(model).forward(model, input_ids, positions, kv_caches, meta, ops)
        embedded = model.embed(input_ids)  # [T, hidden]
        x, residual = self.loop(
            self.stack,
            embedded,
            positions,
            meta.slot_mapping,
            meta.block_tables,
            meta.cu_seqlens_q,
            meta.context_lens,
        )
        return model.norm(x, ops, residual)[0]  # [T, hidden]


def install(model, kv_caches, ops: Kernels, dtype: torch.dtype) -> bool:
    """Make ``model.forward`` the fused one where it applies; whether it does."""
    fused = build(model, kv_caches, ops, dtype)
    if fused is not None:
        model.forward = fused
    return fused is not None


def uninstall(model) -> None:
    """The model's own forward again."""
    model.__dict__.pop("forward", None)


def build(model, kv_caches, ops: Kernels, dtype: torch.dtype) -> FusedForward | None:
    """The fused forward for ``model`` over ``kv_caches``, or None where it does not apply."""
    loop = ops.layer_loop
    if loop is None or type(model) is not LlamaForCausalLM or dtype != torch.float32:
        return None
    plain_model = (
        model.embed_scale is None
        and model.logit_scale is None
        and model.logit_softcap is None
        and not model.long_rope
        and model.rope_types() == {"default": None}
    )
    if not plain_model:
        return None
    layers = [_layer(layer, kv, loop) for layer, kv in zip(model.layers, kv_caches, strict=True)]
    if not all(layers):
        return None
    attn = model.layers[0].self_attn
    cos_sin = model.rope_default
    if cos_sin.shape[1] != attn.dim or cos_sin.dtype != torch.float32:
        return None
    norm = model.layers[0].input_layernorm
    stack = loop.stack(layers, attn.heads, norm.eps, attn.spec.scale, cos_sin.contiguous())
    return None if stack is None else FusedForward(model, loop, stack, kv_caches)


def _layer(layer, kv_cache, loop: LayerLoop) -> LayerWeights | None:
    """One layer's weights for the loop, or None where the layer is not the plain shape."""
    if type(layer) is not DecoderLayer or layer.residual_scale is not None:
        return None
    attn, mlp = layer.self_attn, layer.mlp
    if type(attn) is not Attention or type(mlp) is not MLP or mlp.act != "silu":
        return None
    spec = attn.spec
    if (
        spec.rope != "default"
        or spec.rotary_dim != attn.dim
        or spec.sliding_window is not None
        or spec.softcap is not None
        or spec.qk_norm is not None
        or attn.sinks is not None
    ):
        return None
    linears = [
        (m.weight, m.bias) for m in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj)
    ]
    if not all(loop.supports(w, b) for w, b in linears):
        return None
    norms = (layer.input_layernorm.weight, layer.post_attention_layernorm.weight)
    if any(n.dtype != torch.float32 or not n.is_contiguous() for n in norms):
        return None
    k, v = kv_cache
    if k.dtype != torch.float32 or k.stride() != v.stride() or k.stride(3) != 1:
        return None
    return LayerWeights(*(n.detach() for n in norms), *linears, (k, v))
