"""fp32 linears on CPU through a small C GEMM (``csrc/panel_linear.c``) over panel-packed weights.

oneDNN's packed fp32 GEMM reaches this 2-core EPYC's arithmetic roof at prefill sizes but not at
a decode step's 8-64 rows, where it neither streams the weight at the memory's pace nor hides
the stream under the arithmetic. The C kernel prefetches the next panel of 48 output channels
while it multiplies the current one: SmolLM2's linears + lm_head at 8 / 32 / 64 rows run
1.2-1.7x faster than oneDNN, level at 1,024 (``bench/cpu_kernels_bench.py``). A packed fp32
weight replaces the dense one (same bytes); bf16 stays with oneDNN. ``load()`` returns None where
no C compiler works or the CPU lacks AVX-512F; the CPU kernel set then packs fp32 for oneDNN.
"""

from __future__ import annotations

import ctypes
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from stencil.paths import build_library

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).parent / "csrc" / "panel_linear.c"
FLAGS = ["-O3", "-march=native", "-std=gnu11", "-fopenmp", "-shared", "-fPIC"]
PANEL = 48
"""Output channels per panel (the C kernel's ``PANEL``)."""


@dataclass(frozen=True, slots=True)
class PanelWeight:
    """An fp32 ``[N, K]`` weight as panels of 48 output channels, each k-major (the last panel
    ``N % 48`` wide): ``data`` is flat, ``N * K`` floats."""

    shape: tuple[int, int]
    data: torch.Tensor

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    @classmethod
    def pack(cls, weight: torch.Tensor) -> PanelWeight:
        n, k = weight.shape
        full = n - n % PANEL
        panels = weight[:full].reshape(-1, PANEL, k).transpose(1, 2).reshape(-1)
        data = torch.cat((panels, weight[full:].t().reshape(-1))).contiguous()
        return cls((n, k), data)

    def dense(self) -> torch.Tensor:
        """The ``[N, K]`` weight back (tests, and the pure-torch path)."""
        n, k = self.shape
        full = n - n % PANEL
        panels = self.data[: full * k].view(-1, k, PANEL).transpose(1, 2).reshape(full, k)
        return torch.cat((panels, self.data[full * k :].view(k, n - full).t()))


class PanelLinear:
    """``(x [.., K] fp32, weight: PanelWeight, bias) -> x @ W.T + bias``."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._kernel = library.panel_linear
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        self._kernel.argtypes = [p, p, p, p, i64, i64, i64, ctypes.c_int]
        self._kernel.restype = None

    @staticmethod
    def takes(weight: object) -> bool:
        """Whether ``pack`` applies: an fp32 dense weight with N a multiple of 16."""
        return (
            isinstance(weight, torch.Tensor)
            and weight.dtype == torch.float32
            and weight.dim() == 2
            and weight.shape[0] % 16 == 0
        )

    def pack(self, weight: torch.Tensor) -> PanelWeight:
        return PanelWeight.pack(weight.detach())

    def __call__(
        self, x: torch.Tensor, weight: PanelWeight, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        n, k = weight.shape
        rows = x.reshape(-1, k).to(torch.float32).contiguous()
        out = torch.empty(rows.shape[0], n, dtype=torch.float32)
        if not len(rows):
            return out.view(*x.shape[:-1], n).to(x.dtype)
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
            torch.get_num_threads(),
        )
        return out.view(*x.shape[:-1], n).to(x.dtype)


def load() -> PanelLinear | None:
    """The compiled kernel, or None (logged) where it cannot be built or the CPU lacks AVX-512F."""
    try:
        library = ctypes.CDLL(str(build_library(SOURCE, FLAGS)))
    except (OSError, subprocess.SubprocessError) as e:
        logger.warning("fp32 panel linear unavailable (%s); using oneDNN", e)
        return None
    if not library.panel_linear_available():
        logger.info("CPU without AVX-512F: fp32 linears use oneDNN")
        return None
    return PanelLinear(library)
