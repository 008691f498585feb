"""Linear layers on CPU: the C panel GEMM (``panel_linear``) for the weights it packs, else
oneDNN, the GEMM library PyTorch ships (``torch.ops.mkldnn``).

``F.linear`` on CPU calls MKL's sgemm, which takes slower code paths on non-Intel CPUs; oneDNN
picks its kernels from the CPU's instruction set (AVX-512 on AMD Zen 4 too). On this project's
2-core EPYC, for SmolLM2's fp32 decode shapes (64 rows), it was 1.04-1.22x faster on the layers
and 1.62x on the 49k-row lm_head; bf16 is the same either way (``bench/kernels/cpu_kernels_bench.py``).
Same signature as ``F.linear``; inputs oneDNN does not take here go to ``F.linear``.

``pack_weight`` reorders a weight once, at load, into oneDNN's blocked layout for this CPU (an
opaque ``torch._mkldnn`` tensor that only ``linear`` reads), so no call repacks it: 1.07-1.17x over
the unpacked weight at 64 rows, 1.6-1.8x at 17 rows (``bench/kernels/cpu_kernels_bench.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from stencil.kernels import reference
from stencil.kernels.panel_linear import PanelLinear, PanelWeight
from stencil.kernels.quant_weight import QuantizedWeight, SplitWeight, is_quantized


@functools.cache
def onednn_dtypes() -> tuple[torch.dtype, ...]:
    """The dtypes oneDNN's inner product takes on this CPU: bf16 only where it has a bf16
    kernel (AVX512-BF16, AMX; an AVX2-only CPU refuses the primitive), fp32 everywhere."""
    bf16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return (torch.float32, torch.bfloat16) if bf16 else (torch.float32,)


PACK_ROWS = 64
"""The batch size oneDNN picks the packed layout for (a decode step's rows)."""


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if weight.is_mkldnn:  # packed: only oneDNN reads it, whatever the input's shape
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        out = torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")
        return out.view(*x.shape[:-1], out.shape[-1])
    if x.dim() != 2 or x.dtype not in onednn_dtypes() or not x.is_contiguous():
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class CpuLinear:
    """The CPU kernel set's linear: the C GEMM (``panel_linear``) for the weights it packed,
    ``linear`` for other dense (or oneDNN-packed) weights, the C kernel (``cpu_quant``) for
    quantized ones, their pure-torch twin where that kernel is unavailable."""

    def __init__(
        self, quant: Callable[..., torch.Tensor] | None, panel: PanelLinear | None = None
    ) -> None:
        self.quant = quant
        self.panel = panel

    def __call__(self, x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(weight, PanelWeight):
            return self.panel(x, weight, bias)
        if isinstance(weight, torch.Tensor) and weight.is_mkldnn and x.dim() == 2:
            # the model's every call: a packed weight and [T, K] rows, no reshape or view around it
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "none", [], "")
        if isinstance(weight, QuantizedWeight) and self.quant is not None:
            return self.quant(x, weight, bias)
        if isinstance(weight, SplitWeight):
            out = torch.cat([self(x, part) for part in weight.parts], dim=-1)
            return out if bias is None else out + bias
        if is_quantized(weight):
            return reference.quant_linear(x, weight, bias)
        if weight.dtype != x.dtype:  # a weight kept in its file's bf16 under fp32 activations
            return linear(x.to(weight.dtype), weight, None).to(x.dtype) + (
                0 if bias is None else bias
            )
        return linear(x, weight, bias)

    def grouped(
        self,
        x: torch.Tensor,
        weights: list,
        counts: list[int],
        biases=None,
        rows=None,
        combine=None,
    ):
        """Rows grouped by expert (``reference.grouped_linear``, its ``rows`` gather and
        ``combine`` included): quantized experts of one format in one C call where the int8-row
        kernel runs, packed dense ones in one C GEMM call, else one linear per expert."""
        quant = self.quant
        if (
            quant is not None
            and getattr(quant, "takes_grouped", None)
            and quant.takes_grouped(weights)
        ):
            return quant.grouped(x, weights, counts, biases, rows, combine)
        panel = self.panel
        if panel is not None and panel.takes_grouped(weights):  # dense experts, one call
            h = panel.grouped(x if rows is None else x[rows], weights, counts, biases)
            return h if combine is None else reference.combine_rows(h, combine)
        return reference.grouped_linear(
            x, weights, counts, biases, linear=self, rows=rows, combine=combine
        )

    def pack_weight(self, weight):
        """``weight`` in the layout this linear reads fastest: panels where the C GEMM runs its
        dtype here, else ``pack_weight``'s oneDNN layout."""
        if self.panel is not None and self.panel.takes(weight):
            return self.panel.pack(weight)
        return pack_weight(weight)


def pack_weight(weight):
    """``weight`` in oneDNN's blocked layout (for ``linear`` only); other dtypes and quantized
    weights unchanged."""
    if not isinstance(weight, torch.Tensor) or weight.dtype not in onednn_dtypes():
        return weight
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS)


def available() -> bool:
    ops = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(ops, "_linear_pointwise")
        and hasattr(ops, "_reorder_linear_weight")
    )
