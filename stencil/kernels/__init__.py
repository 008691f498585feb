"""Kernels of the engine: Triton on CUDA, a C paged-attention kernel on CPU, the pure-torch
reference everywhere else (and as the oracle of both).

``get_kernels(device, backend)`` picks the set; every set shares the signatures of ``reference``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Kernels", "get_kernels"]


@dataclass(frozen=True, slots=True)
class Kernels:
    """One backend's kernels: ``name`` is ``"triton"``, ``"cpu"`` or ``"reference"``.
    ``pack_weight`` (or None) turns a linear weight, once at load, into the layout ``linear``
    reads fastest; a packed weight is for ``linear`` only."""

    name: str
    linear: Callable[..., torch.Tensor]
    write_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]
    apply_token_bitmask_inplace: Callable[..., None]
    pack_weight: Callable[[torch.Tensor], torch.Tensor] | None = None


def get_kernels(device: torch.device | str, backend: str = "auto") -> Kernels:
    """``backend`` "auto": Triton kernels on CUDA when Triton imports; on CPU the C attention
    kernel when a C compiler works, with oneDNN linears (and the C kernel for quantized weights);
    else (and for "torch") the reference kernels."""
    from stencil.kernels import reference

    kind = torch.device(device).type
    if backend == "auto" and kind == "cuda":
        try:
            return _triton_kernels()
        except ImportError:
            pass
    if backend == "auto" and kind == "cpu":
        from stencil.kernels import cpu_attention, cpu_linear, cpu_quant

        attention = cpu_attention.load()
        if attention is not None:
            onednn = cpu_linear.available()
            linear = cpu_linear.CpuLinear(cpu_quant.load()) if onednn else reference.linear
            return Kernels(
                "cpu",
                linear,
                reference.write_kv,
                attention,
                reference.apply_token_bitmask_inplace,
                cpu_linear.pack_weight if onednn else None,
            )
    return Kernels(
        "reference",
        reference.linear,
        reference.write_kv,
        reference.paged_attention,
        reference.apply_token_bitmask_inplace,
    )


def _triton_kernels() -> Kernels:
    from stencil.kernels import reference

    kv = importlib.import_module("stencil.kernels.triton_kv")
    attn = importlib.import_module("stencil.kernels.triton_attention")
    mask = importlib.import_module("stencil.kernels.triton_bitmask")
    return Kernels(
        "triton",
        reference.linear,
        kv.write_kv,
        attn.paged_attention,
        mask.apply_token_bitmask_inplace,
    )
