"""Linear layers on CPU through oneDNN, the GEMM library PyTorch ships (``torch.ops.mkldnn``).

``F.linear`` on CPU calls MKL's sgemm, which takes slower code paths on non-Intel CPUs; oneDNN
picks its kernels from the CPU's instruction set (AVX-512 on AMD Zen 4 too). On this project's
2-core EPYC, for SmolLM2's fp32 decode shapes (64 rows), it was 1.04-1.22x faster on the layers
and 1.62x on the 49k-row lm_head; bf16 is the same either way (``bench/cpu_kernels_bench.py``).
Same signature as ``F.linear``; inputs oneDNN does not take here go to ``F.linear``.

``pack_weight`` reorders a weight once, at load, into oneDNN's blocked layout for this CPU (an
opaque ``torch._mkldnn`` tensor that only ``linear`` reads), so no call repacks it: 1.07-1.17x over
the unpacked weight at 64 rows, 1.6-1.8x at 17 rows (``bench/cpu_kernels_bench.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_ONEDNN_DTYPES = (torch.float32, torch.bfloat16)


PACK_ROWS = 64
"""The batch size oneDNN picks the packed layout for (a decode step's rows)."""


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if weight.is_mkldnn:  # packed: only oneDNN reads it, whatever the input's shape
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        out = torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")
        return out.view(*x.shape[:-1], out.shape[-1])
    if x.dim() != 2 or x.dtype not in _ONEDNN_DTYPES or not x.is_contiguous():
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` in oneDNN's blocked layout (for ``linear`` only); other dtypes unchanged."""
    if weight.dtype not in _ONEDNN_DTYPES:
        return weight
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)


def available() -> bool:
    ops = torch.ops.mkldnn
    return (torch.backends.mkldnn.is_available() and hasattr(ops, "_linear_pointwise")
            and hasattr(ops, "_reorder_linear_weight"))
