"""Linears on CPU through a small C GEMM (``csrc/panel_linear.c``) over panel-packed weights.

oneDNN's packed GEMM reaches this 2-core EPYC's arithmetic roof at prefill sizes but not at a
decode step's 8-64 rows, where it neither streams the weight at the memory's pace nor hides the
stream under the arithmetic. The C kernel prefetches the next panel of 48 output channels while
it multiplies the current one: SmolLM2's fp32 linears + lm_head at 8 / 32 / 64 rows run 1.2-1.7x
faster than oneDNN, level at 1,024 (``bench/kernels/cpu_kernels_bench.py``). fp32 weights (AVX-512F)
and bf16 weights (AVX512-BF16, k pairs for vdpbf16ps) are packed in place of the dense ones
(same bytes). ``load()`` returns None where no C compiler works or the CPU lacks AVX-512F; the
CPU kernel set then packs for oneDNN, as it does a dtype the CPU cannot run here.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "panel_linear.c"
FLAGS = ["-O3", "-march=native", "-std=gnu11", "-fopenmp", "-shared", "-fPIC"]
PANEL = 48
"""Output channels per panel (the C kernel's ``PANEL``)."""
DTYPES = (torch.float32, torch.bfloat16)
"""Bit i of ``panel_linear_available()``: the kernel runs ``DTYPES[i]``."""


@dataclass(frozen=True, slots=True)
class PanelWeight:
    """An ``[N, K]`` weight as panels of 48 output channels (the last one ``N % 48`` wide),
    each k-major: ``[K][48]`` in fp32, ``[K / 2][48][2]`` (k pairs) in bf16. ``data`` is flat,
    ``N * K`` values of the weight's dtype."""

    shape: tuple[int, int]
    data: torch.Tensor

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    @classmethod
    def pack(cls, weight: torch.Tensor) -> PanelWeight:
        n, k = weight.shape
        pair = 2 if weight.dtype == torch.bfloat16 else 1
        full = n - n % PANEL
        panels = weight[:full].reshape(-1, PANEL, k // pair, pair).transpose(1, 2)
        rest = weight[full:].reshape(n - full, k // pair, pair).transpose(0, 1)
        return cls((n, k), torch.cat((panels.reshape(-1), rest.reshape(-1))))

    def dense(self) -> torch.Tensor:
        """The ``[N, K]`` weight back (tests, and the pure-torch path)."""
        n, k = self.shape
        pair = 2 if self.dtype == torch.bfloat16 else 1
        full = n - n % PANEL
        panels = self.data[: full * k].view(-1, k // pair, PANEL, pair).transpose(1, 2)
        rest = self.data[full * k :].view(k // pair, n - full, pair).transpose(0, 1)
        return torch.cat((panels.reshape(full, k), rest.reshape(n - full, k)))


class PanelLinear:
    """``(x [.., K], weight: PanelWeight, bias) -> x @ W.T + bias`` in the weight's dtype."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._kernel = library.panel_linear
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        self._kernel.argtypes = [p, p, p, p, i64, i64, i64, ctypes.c_int, ctypes.c_int]
        self._kernel.restype = None
        self._grouped = library.panel_linear_grouped
        self._grouped.argtypes = [p, p, ctypes.c_int, p, p, p, i64, i64, ctypes.c_int, ctypes.c_int]
        self._grouped.restype = None
        self._experts: dict[tuple[int, ...], tuple] = {}
        runs = library.panel_linear_available()
        self.dtypes = tuple(dtype for i, dtype in enumerate(DTYPES) if runs >> i & 1)

    def takes(self, weight: object) -> bool:
        """Whether ``pack`` applies: a dense weight of a dtype this CPU runs, N a multiple of
        16 (and K even in bf16)."""
        return (
            isinstance(weight, torch.Tensor)
            and weight.dtype in self.dtypes
            and weight.dim() == 2
            and weight.shape[0] % 16 == 0
            and (weight.dtype != torch.bfloat16 or weight.shape[1] % 2 == 0)
        )

    def pack(self, weight: torch.Tensor) -> PanelWeight:
        return PanelWeight.pack(weight.detach())

    def __call__(
        self, x: torch.Tensor, weight: PanelWeight, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        (n, k), dtype = weight.shape, weight.dtype
        rows = x.reshape(-1, k).to(dtype).contiguous()
        out = torch.empty(rows.shape[0], n, dtype=dtype)
        if len(rows):
            if bias is not None:
                bias = bias.to(torch.float32).contiguous()
            self._kernel(
                rows.data_ptr(),
                weight.data.data_ptr(),
                None if bias is None else bias.data_ptr(),
                out.data_ptr(),
                rows.shape[0],
                n,
                k,
                dtype == torch.bfloat16,
                torch.get_num_threads(),
            )
        return out.view(*x.shape[:-1], n).to(x.dtype)

    def takes_grouped(self, weights) -> bool:
        """Whether ``grouped`` runs these experts in one call (packed, one shape and dtype)."""
        first = weights[0]
        return isinstance(first, PanelWeight) and all(
            isinstance(w, PanelWeight) and w.shape == first.shape and w.dtype == first.dtype
            for w in weights
        )

    def grouped(
        self,
        x: torch.Tensor,  # [M, K] rows grouped by expert
        weights,  # PanelWeight per expert, one shape [N, K] and dtype
        counts: list[int],  # rows per expert, sum M
        biases=None,  # fp32-able [N] per expert, or None
    ) -> torch.Tensor:  # [M, N] in x's dtype
        """Each expert's rows times its weight, every expert in one kernel call."""
        (n, k), dtype = weights[0].shape, weights[0].dtype
        rows = x.to(dtype).contiguous()
        out = torch.empty(rows.shape[0], n, dtype=dtype)
        if len(rows):
            pointers = self._pointers(weights, biases)
            offsets = torch.tensor([0, *counts], dtype=torch.int64).cumsum(0)
            self._grouped(
                rows.data_ptr(),
                offsets.data_ptr(),
                len(weights),
                ctypes.addressof(pointers[0]),
                ctypes.addressof(pointers[1]),
                out.data_ptr(),
                n,
                k,
                dtype == torch.bfloat16,
                torch.get_num_threads(),
            )
        return out.to(x.dtype)

    def _pointers(self, weights, biases) -> tuple:
        """ctypes arrays of the experts' packed data and fp32 biases (built once per set)."""
        key = (*map(id, weights), *map(id, biases or ()))
        if key not in self._experts:
            arr = ctypes.c_void_p * len(weights)
            bias = [None] * len(weights)
            if biases is not None:
                bias = [b.to(torch.float32).contiguous() for b in biases]
            self._experts[key] = (
                arr(*(w.data.data_ptr() for w in weights)),
                arr(*(None if b is None else b.data_ptr() for b in bias)),
                weights,
                bias,  # kept alive with the pointers
            )
        return self._experts[key]


def load() -> PanelLinear | None:
    """The compiled kernel, or None (logged) where it cannot be built or the CPU lacks AVX-512F."""
    library = load_library(SOURCE, FLAGS, "using oneDNN", ("panel_linear_available", "AVX-512F"))
    return PanelLinear(library) if library is not None else None
