"""Quantized linears on CPU through a small C kernel (``csrc/quant_linear.c``), built on first use.

torch's own weight-only CPU ops (``_weight_int8pack_mm``, ``_weight_int4pack_mm_for_cpu``) were
measured first: they are fast for one row but at the engine's decode batches (16-64 rows) they
are slower than oneDNN's fp32 linear on the dense weight (and take fp32 inputs 20-100x slower
still), see ``bench/engine/quant_bench.py --kernels``. The C kernel expands each strip of codes once into
bf16 integers and dots every row against it (AVX512-BF16), applying scales and mins in fp32.

Where the CPU has AVX512-VNNI the rows are instead rounded to int8 per block of 32 (one fp32 scale
each, llama.cpp's Q8 activations) and dotted against the codes as bytes (``csrc/quant_linear_i8.c``):
half the instructions per multiply-add and no conversion of the codes, at the cost of rounding the
activations to 8 bits (``reference.int8_rows`` is that rounding; see docs/engine.md for the error).
Where the CPU has neither AVX512-BF16 nor AVX512-VNNI but AVX2, FMA and F16C (AMD before Zen 4,
Intel client parts) the same int8 kernel runs on 256-bit ``vpmaddubsw`` (``csrc/quant_linear_avx2.c``:
the same ABI and the same output bits).
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import torch

from stencil.kernels.quant_weight import QuantizedWeight
from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "quant_linear.c"
SOURCE_I8 = Path(__file__).parent / "csrc" / "quant_linear_i8.c"
SOURCE_AVX2 = Path(__file__).parent / "csrc" / "quant_linear_avx2.c"
FLAGS = ["-O3", "-march=native", "-std=gnu11", "-fopenmp", "-shared", "-fPIC"]
_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_ARGTYPES = [
    _P,
    _P,
    _I64,
    ctypes.c_int,
    _I64,
    ctypes.c_int,
    ctypes.c_int,
    _P,
    _P,
    _P,
    _P,
    _P,
    _P,
    _P,
    _P,
    _P,
    ctypes.c_int,
]
_ARGTYPES_I8 = [_P, _I64, ctypes.c_int, _I64, ctypes.c_int, ctypes.c_int, ctypes.c_int]
_ARGTYPES_I8 += [_P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_int]


class CpuQuantLinear:
    """``(x, weight: QuantizedWeight, bias) -> x @ weight.T + bias`` in x's dtype; x is rounded to
    int8 per block of 32 (``i8``: the VNNI or AVX2 kernel, ``i8_source`` its C file) or else to
    bf16 for the dot products (``library``; accumulation, scales and output stay fp32). One of
    the two libraries at least."""

    def __init__(
        self,
        library: ctypes.CDLL | None,
        i8: ctypes.CDLL | None = None,
        i8_source: Path = SOURCE_I8,
    ) -> None:
        if library is None and i8 is None:
            raise ValueError("CpuQuantLinear needs the bf16 or the int8 kernel")
        self._kernel = None if library is None else library.qlinear
        if self._kernel is not None:
            self._kernel.argtypes = _ARGTYPES
            self._kernel.restype = None
        self.i8_source = i8_source if i8 is not None else None
        self._i8 = None if i8 is None else i8.qlinear_i8
        self._grouped = None if i8 is None else i8.qlinear_i8_grouped
        if self._i8 is not None:
            self._i8.argtypes = _ARGTYPES_I8
            self._i8.restype = ctypes.c_int
            self._grouped.argtypes = [_P, _P, ctypes.c_int, ctypes.c_int, _I64, ctypes.c_int]
            self._grouped.argtypes += [ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P]
            self._grouped.argtypes += [ctypes.c_int, _P, _I64, ctypes.c_int, _P, _P, _P]
            self._grouped.restype = ctypes.c_int
        self._tables: dict[int, torch.Tensor] = {}
        self._experts: dict[tuple[int, ...], tuple] = {}
        self._formats: dict[tuple[int, ...], tuple] = {}  # experts that takes_grouped accepted

    @property
    def int8_activations(self) -> bool:
        return self._i8 is not None

    def __call__(
        self, x: torch.Tensor, weight: QuantizedWeight, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        n, k = weight.shape
        rows = x.reshape(-1, k)
        padded = weight.scales.shape[0] * 16
        if bias is not None:
            bias = torch.nn.functional.pad(bias.float(), (0, padded - n)).contiguous()
        if self._i8 is not None:
            out = self._run_i8(rows.float().contiguous(), weight, bias, padded)
        else:
            out = self._run_bf16(rows, weight, bias, padded)
        if padded != n:
            out = out[:, :n]
        return out.to(x.dtype).view(*x.shape[:-1], n)

    def _run_i8(self, xf: torch.Tensor, weight: QuantizedWeight, bias, padded: int) -> torch.Tensor:
        m, k = xf.shape
        out = torch.empty(m, padded, dtype=torch.float32)
        if m:
            status = self._i8(
                xf.data_ptr(),
                m,
                k,
                padded,
                weight.bits,
                weight.group,
                weight.zero,
                weight.codes.data_ptr(),
                _ptr(weight.planes),
                *_scale_pointers(weight),
                _ptr(bias),
                out.data_ptr(),
                torch.get_num_threads(),
            )
            if status:
                raise MemoryError(f"quantized linear: no scratch memory for {m}x{k} activations")
        return out

    def _run_bf16(
        self, rows: torch.Tensor, weight: QuantizedWeight, bias, padded: int
    ) -> torch.Tensor:
        k = weight.shape[1]
        xb = rows.to(torch.bfloat16).contiguous()  # [M, K]
        m = xb.shape[0]
        xsum = None
        if weight.mins is not None:
            xsum = xb.float().view(m, k // weight.group, weight.group).sum(-1)  # [M, K/G]
        out = torch.empty(m, padded, dtype=torch.float32)
        if m:
            self._kernel(
                xb.data_ptr(),
                _ptr(xsum),
                m,
                k,
                padded,
                weight.bits,
                weight.group,
                weight.codes.data_ptr(),
                _ptr(weight.planes),
                *_scale_pointers(weight),
                self._table(weight.zero).data_ptr(),
                _ptr(bias),
                out.data_ptr(),
                torch.get_num_threads(),
            )
        return out

    def takes_grouped(self, weights) -> bool:
        """Whether ``grouped`` runs these experts in one call (one format, 16-channel strips)."""
        if self._grouped is None:
            return False
        if (*map(id, weights),) in self._formats:
            return True
        if not all(isinstance(w, QuantizedWeight) for w in weights):
            return False

        def key(w: QuantizedWeight) -> tuple:
            return w.shape, w.bits, w.group, w.zero, w.mins is None, w.super_scales is None

        same = weights[0].shape[0] % 16 == 0 and all(key(w) == key(weights[0]) for w in weights)
        if same:  # kept with the weights, so that their ids stay theirs
            self._formats[(*map(id, weights),)] = tuple(weights)
        return same

    def grouped(
        self,
        x: torch.Tensor,  # [T, K], or [M, K] rows grouped by expert when ``rows`` is None
        weights: list[QuantizedWeight],
        counts: list[int],  # rows per expert, sum M
        biases: list[torch.Tensor | None] | None = None,
        rows: torch.Tensor | None = None,  # [M] the x row of each grouped row (the gather)
        combine: tuple | None = None,  # (tokens [M], scale [M], T): token of each row, weight
    ) -> torch.Tensor:  # [M, N], or [T, N] combined; x's dtype
        """Each expert's rows times its weight, every expert in one kernel call (int8 rows).
        ``rows`` gathers the input rows, ``combine`` sums each token's weighted rows back
        (``reference.grouped_linear``), inside the same call."""
        first = weights[0]
        n, k = first.shape
        pointers = self._pointers(weights, biases)
        xf = x.float().contiguous()
        offsets = torch.tensor([0, *counts], dtype=torch.int64).cumsum(0)
        m = int(offsets[-1])
        out = torch.empty(m, n, dtype=torch.float32)
        num_tokens, top, pos, w, combined = 0, 0, None, None, None
        if combine is not None:
            tokens, scale, num_tokens = combine
            top = m // max(num_tokens, 1)
            pos = torch.argsort(tokens, stable=True).contiguous()  # [T * top] by token, in order
            w = scale.float().flatten()[pos].contiguous()
            combined = torch.zeros(num_tokens, n, dtype=torch.float32)
        if m:
            rows_c = None if rows is None else rows.to(torch.int64).contiguous()
            status = self._grouped(
                xf.data_ptr(),
                offsets.data_ptr(),
                len(weights),
                k,
                n,
                first.bits,
                first.group,
                first.zero,
                *(ctypes.addressof(p) for p in pointers[:7]),
                out.data_ptr(),
                torch.get_num_threads(),
                None if rows_c is None else rows_c.data_ptr(),
                num_tokens,
                top,
                None if pos is None else pos.data_ptr(),
                None if w is None else w.data_ptr(),
                None if combined is None else combined.data_ptr(),
            )
            if status:
                raise MemoryError(f"grouped quantized linear: no scratch for {m}x{k}")
        return (out if combined is None else combined).to(x.dtype)

    def _pointers(self, weights, biases) -> tuple:
        """ctypes arrays of the experts' codes, planes, scales, mins, super-block scales and
        mins, and biases (built once)."""
        key = (*map(id, weights), *map(id, biases or ()))
        if key not in self._experts:
            arr = ctypes.c_void_p * len(weights)
            bias = (
                [None] * len(weights)
                if biases is None
                else [b.float().contiguous() for b in biases]
            )
            self._experts[key] = (
                arr(*(w.codes.data_ptr() for w in weights)),
                arr(*(_ptr(w.planes) for w in weights)),
                *(arr(*p) for p in zip(*map(_scale_pointers, weights), strict=True)),
                arr(*(_ptr(b) for b in bias)),
                weights,
                bias,  # kept alive with the pointers
            )
        return self._experts[key]

    def _table(self, zero: int) -> torch.Tensor:
        if zero not in self._tables:  # bf16 of (code - zero), code 0..63
            self._tables[zero] = (torch.arange(64) - zero).to(torch.bfloat16).view(torch.int16)
        return self._tables[zero]


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _scale_pointers(w: QuantizedWeight) -> tuple:
    """The kernels' scales, mins, super-block scales and mins arguments."""
    return tuple(map(_ptr, (w.scales, w.mins, w.super_scales, w.super_mins)))


def load(int8_activations: bool = True) -> CpuQuantLinear | None:
    """The compiled kernels: the int8-activation VNNI kernel where ``int8_activations`` and the
    CPU has AVX512-VNNI, else the bf16 one (AVX512-BF16), else (``int8_activations``) the AVX2
    int8 kernel; None where none of them can be built or runs on this CPU (the pure-torch path).
    """
    library = load_library(
        SOURCE, FLAGS, "no bf16-activation kernel", ("qlinear_available", "AVX512-BF16")
    )
    if not int8_activations:
        return None if library is None else CpuQuantLinear(library)
    instead = "using bf16 activations" if library is not None else "trying AVX2"
    i8 = load_library(SOURCE_I8, FLAGS, instead, ("qlinear_i8_available", "AVX512-VNNI"))
    if i8 is not None:
        return CpuQuantLinear(library, i8, SOURCE_I8)
    return CpuQuantLinear(library) if library is not None else load_avx2()


def load_avx2() -> CpuQuantLinear | None:
    """The AVX2 int8-activation kernel alone (any CPU with AVX2, FMA and F16C, AVX-512 ones too:
    the tests compare it with the VNNI kernel there), or None."""
    avx2 = load_library(
        SOURCE_AVX2, FLAGS, "using the pure-torch path", ("qlinear_i8_available", "AVX2+FMA+F16C")
    )
    if avx2 is None:
        logging.getLogger(__name__).warning(
            "no compiled quantized linear runs here (it needs a C compiler and AVX2, FMA, F16C):"
            " quantized weights are dequantized on every call, hundreds of times slower;"
            " --quantization none dequantizes them once at load"
        )
        return None
    return CpuQuantLinear(None, avx2, SOURCE_AVX2)
