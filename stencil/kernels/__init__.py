"""Kernels of the engine: Triton on CUDA, a C paged-attention kernel on CPU, the pure-torch
reference everywhere else (and as the oracle of both).

``get_kernels(device, backend)`` picks the set; every set shares the signatures of ``reference``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

__all__ = ["Kernels", "get_kernels", "with_layer_op_twins"]


@dataclass(frozen=True, slots=True)
class Kernels:
    """One backend's kernels: ``name`` is ``"triton"``, ``"cpu"`` or ``"reference"``.
    ``pack_weight`` (or None) turns a linear weight, once at load, into the layout ``linear``
    reads fastest; a packed weight is for ``linear`` only. The layer ops (``rms_norm``,
    ``fused_add_rms_norm``, ``rotary_embedding``, ``silu_and_mul``, vLLM's names) work in place."""

    name: str
    linear: Callable[..., torch.Tensor]
    write_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]
    apply_token_bitmask_inplace: Callable[..., None]
    rms_norm: Callable[..., None]
    fused_add_rms_norm: Callable[..., None]
    rotary_embedding: Callable[..., None]
    silu_and_mul: Callable[..., None]
    pack_weight: Callable[[torch.Tensor], object] | None = None
    grouped_linear: Callable[..., torch.Tensor] | None = None  # MoE experts; None: the reference
    layer_loop: object | None = None  # cpu_layer_loop.LayerLoop: a layer stack in one C call


def get_kernels(device: torch.device | str, backend: str = "auto") -> Kernels:
    """``backend`` "auto": Triton kernels on CUDA when Triton imports; on CPU the C attention
    kernel when a C compiler works, with the C panel GEMM (fp32, bf16) and oneDNN linears (and the
    C kernel for quantized weights), the C layer ops and the C token bitmask; else (and for "torch")
    the reference kernels."""
    from stencil.kernels import reference

    kind = torch.device(device).type
    if backend == "auto" and kind == "cuda":
        try:
            return _triton_kernels()
        except ImportError:
            pass
    if backend == "auto" and kind == "cpu":
        from stencil.kernels import (
            cpu_attention,
            cpu_bitmask,
            cpu_layer_loop,
            cpu_layer_ops,
            cpu_linear,
            cpu_quant,
            panel_linear,
        )

        attention = cpu_attention.load()
        if attention is not None:
            onednn = cpu_linear.available()
            layer = cpu_layer_ops.load() or reference
            linear = cpu_linear.CpuLinear(cpu_quant.load(), panel_linear.load()) if onednn else None
            loop = cpu_layer_loop.load(linear and linear.quant, layer, attention)
            return Kernels(
                "cpu",
                linear or reference.linear,
                layer.write_kv,
                attention,
                cpu_bitmask.load() or reference.apply_token_bitmask_inplace,
                layer.rms_norm,
                layer.fused_add_rms_norm,
                layer.rotary_embedding,
                layer.silu_and_mul,
                linear.pack_weight if linear else None,
                linear.grouped if linear else None,
                loop,
            )
    return _with_reference_layer_ops(
        "reference",
        reference.linear,
        reference.write_kv,
        reference.paged_attention,
        reference.apply_token_bitmask_inplace,
    )


def with_layer_op_twins(kernels: Kernels) -> Kernels:
    """``kernels`` with the torch twins (``reference``) for the layer ops and the KV write: the
    oracle the fused C ops are compared and timed against."""
    from stencil.kernels import reference

    return replace(
        kernels,
        rms_norm=reference.rms_norm,
        fused_add_rms_norm=reference.fused_add_rms_norm,
        rotary_embedding=reference.rotary_embedding,
        silu_and_mul=reference.silu_and_mul,
        write_kv=reference.write_kv,
        layer_loop=None,
    )


def _with_reference_layer_ops(name, linear, write_kv, attention, apply_bitmask) -> Kernels:
    from stencil.kernels import reference

    return Kernels(
        name,
        linear,
        write_kv,
        attention,
        apply_bitmask,
        reference.rms_norm,
        reference.fused_add_rms_norm,
        reference.rotary_embedding,
        reference.silu_and_mul,
    )


def _triton_kernels() -> Kernels:
    from stencil.kernels import reference

    kv = importlib.import_module("stencil.kernels.triton_kv")
    attn = importlib.import_module("stencil.kernels.triton_attention")
    mask = importlib.import_module("stencil.kernels.triton_bitmask")
    return _with_reference_layer_ops(
        "triton",
        reference.linear,
        kv.write_kv,
        attn.paged_attention,
        mask.apply_token_bitmask_inplace,
    )
