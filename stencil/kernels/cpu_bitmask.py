"""The token bitmask applied to logits on CPU in C (``csrc/token_bitmask.c``): the twin of
``reference.apply_token_bitmask_inplace`` (which unpacks every bit of the row through torch ops:
~0.3 ms a 49k-token row, where this takes ~10 µs). float32 logits whose last dimension is
contiguous go to C, anything else to the twin. ``load()`` returns None where no C compiler
works."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from stencil.kernels import reference
from stencil.kernels.cpu_attention import FLAGS
from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "token_bitmask.c"
_P, _L = ctypes.c_void_p, ctypes.c_int64


class CpuTokenBitmask:
    def __init__(self, library: ctypes.CDLL) -> None:
        self._fn = library.apply_token_bitmask
        self._fn.restype, self._fn.argtypes = None, [_P, _L, _P, _L, _P, _L, _L, _L]

    def __call__(
        self,
        logits: torch.Tensor,  # [R, V] float
        bitmask: torch.Tensor,  # [R, W] int32, bit j of word w = token 32 * w + j allowed
        indices: torch.Tensor | None = None,  # rows of logits (and bitmask) to mask; None = all
    ) -> None:
        """Set ``logits`` to -inf where the bitmask bit is 0 (tokens past ``32 * W`` too)."""
        if (
            logits.dtype != torch.float32
            or not logits.is_cpu
            or logits.dim() != 2
            or logits.stride(1) != 1
            or bitmask.dtype != torch.int32
            or not bitmask.is_cpu
            or bitmask.dim() != 2
            or bitmask.stride(1) != 1
        ):
            return reference.apply_token_bitmask_inplace(logits, bitmask, indices)
        n = logits.shape[0] if indices is None else indices.numel()
        if indices is not None:
            indices = indices.to(torch.int64).contiguous()
        if n:
            low, top = (0, n - 1) if indices is None else (int(indices.min()), int(indices.max()))
            if low < 0 or top >= min(logits.shape[0], bitmask.shape[0]):
                raise IndexError(
                    f"bitmask rows {low}..{top} outside {logits.shape[0]} logits rows / "
                    f"{bitmask.shape[0]} bitmask rows"
                )
        self._fn(
            logits.data_ptr(),
            logits.stride(0),
            bitmask.data_ptr(),
            bitmask.stride(0),
            indices.data_ptr() if indices is not None else None,
            n,
            logits.shape[1],
            bitmask.shape[1],
        )


def load() -> CpuTokenBitmask | None:
    """The compiled library (built into the cache on first use), or None where it cannot build."""
    library = load_library(SOURCE, FLAGS, "using the pure-torch bitmask")
    return CpuTokenBitmask(library) if library is not None else None
