"""Kernels of the engine: Triton on CUDA, the pure-torch reference elsewhere.

``get_kernels(device)`` picks the set; both sets share the signatures of ``reference``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Kernels", "get_kernels"]


@dataclass(frozen=True, slots=True)
class Kernels:
    """One backend's kernels: ``name`` is ``"triton"`` or ``"reference"``."""

    name: str
    write_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]
    apply_token_bitmask_inplace: Callable[..., None]


def get_kernels(device: torch.device | str) -> Kernels:
    """Triton kernels for a CUDA device when Triton imports, else the reference kernels."""
    if torch.device(device).type == "cuda":
        try:
            return _triton_kernels()
        except ImportError:
            pass
    from stencil.kernels import reference

    return Kernels(
        "reference",
        reference.write_kv,
        reference.paged_attention,
        reference.apply_token_bitmask_inplace,
    )


def _triton_kernels() -> Kernels:
    kv = importlib.import_module("stencil.kernels.triton_kv")
    attn = importlib.import_module("stencil.kernels.triton_attention")
    mask = importlib.import_module("stencil.kernels.triton_bitmask")
    return Kernels("triton", kv.write_kv, attn.paged_attention, mask.apply_token_bitmask_inplace)
