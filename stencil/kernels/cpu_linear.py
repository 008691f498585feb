"""Linear layers on CPU through oneDNN, the GEMM library PyTorch ships (``torch.ops.mkldnn``).

``F.linear`` on CPU calls MKL's sgemm, which takes slower code paths on non-Intel CPUs; oneDNN
picks its kernels from the CPU's instruction set (AVX-512 on AMD Zen 4 too). On this project's
2-core EPYC, for SmolLM2's fp32 decode shapes (64 rows), it was 1.04-1.22x faster on the layers
and 1.62x on the 49k-row lm_head; bf16 is the same either way (``bench/cpu_kernels_bench.py``).
Same signature as ``F.linear``; inputs oneDNN does not take here go to ``F.linear``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_ONEDNN_DTYPES = (torch.float32, torch.bfloat16)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if x.dim() != 2 or x.dtype not in _ONEDNN_DTYPES or not x.is_contiguous():
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
