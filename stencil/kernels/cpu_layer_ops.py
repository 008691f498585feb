"""A decoder layer's elementwise work on CPU through one small C library (``csrc/layer_ops.c``):
``rms_norm``, ``fused_add_rms_norm``, ``rotary_embedding``, ``silu_and_mul`` and ``write_kv``,
each one call where the torch twins in ``reference`` dispatch several ops.

Same signatures and in-place semantics as the twins; float32 and bfloat16 tensors whose last
dimension is contiguous go to C, anything else (other dtypes, mixed dtypes, odd layouts) to the
twin. ``load()`` returns None where no C compiler works.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from stencil.kernels import reference
from stencil.kernels.cpu_attention import FLAGS
from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "layer_ops.c"
_P, _I, _L, _F = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
_SIGNATURES = {
    "rms_norm": (None, [_P, _L, _L, _P, _L, _L, _P, _L, _L, _I, _F, _I, _I]),
    "fused_add_rms_norm": (None, [_P, _L, _P, _L, _P, _L, _I, _F, _I, _I]),
    "rotary_embedding": (_L, [_P, _L, _P, _L, _L, _I, _P, _L, _L, _I, _P, _L, _I, _I, _I]),
    "silu_and_mul": (None, [_P, _L, _P, _L, _L, _I, _I, _I]),
    "write_kv": (_L, [_P, _L, _L, _P, _L, _L, _P, _P, _L, _L, _L, _P, _L, _I, _I, _L, _L, _I, _I]),
}
_BF16 = {torch.float32: 0, torch.bfloat16: 1}


def _kind(first: torch.Tensor, *rest: torch.Tensor) -> int | None:
    """0 (float32) or 1 (bfloat16) when every tensor has that dtype, lives on the CPU and has a
    contiguous last dimension; else None."""
    bf16 = _BF16.get(first.dtype)
    if bf16 is None or not first.is_cpu or first.stride()[-1] != 1:
        return None
    for t in rest:  # (attribute reads: this runs several times per layer)
        if t.dtype != first.dtype or not t.is_cpu or t.stride()[-1] != 1:
            return None
    return bf16


def _rows(t: torch.Tensor) -> tuple[int, int, int, int]:
    """A 2-d or 3-d tensor's rows as (n0, n1, stride0, stride1)."""
    shape, stride = t.shape, t.stride()
    if len(shape) == 2:
        return shape[0], 1, stride[0], 0
    return shape[0], shape[1], stride[0], stride[1]


class CpuLayerOps:
    """The library's five ops as methods with the signatures of their ``reference`` twins."""

    def __init__(self, library: ctypes.CDLL) -> None:
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(library, name)
            fn.restype, fn.argtypes = restype, argtypes
        self._lib = library

    def rms_norm(self, out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float):
        bf16 = _kind(x, out, weight)
        if bf16 is None or x.dim() not in (2, 3) or out.shape != x.shape or not _vector(weight, x):
            return reference.rms_norm(out, x, weight, eps)
        n0, n1, xs0, xs1 = _rows(x)
        _, _, os0, os1 = _rows(out)
        self._lib.rms_norm(
            out.data_ptr(),
            os0,
            os1,
            x.data_ptr(),
            xs0,
            xs1,
            weight.data_ptr(),
            n0,
            n1,
            x.shape[-1],
            eps,
            bf16,
            torch.get_num_threads(),
        )

    def fused_add_rms_norm(self, x, residual, weight, eps: float) -> None:
        bf16 = _kind(x, residual, weight)
        if bf16 is None or x.dim() != 2 or residual.shape != x.shape or not _vector(weight, x):
            return reference.fused_add_rms_norm(x, residual, weight, eps)
        self._lib.fused_add_rms_norm(
            x.data_ptr(),
            x.stride()[0],
            residual.data_ptr(),
            residual.stride()[0],
            weight.data_ptr(),
            x.shape[0],
            x.shape[1],
            eps,
            bf16,
            torch.get_num_threads(),
        )

    def rotary_embedding(self, positions, q, k, cos_sin) -> None:
        bf16 = _kind(q, k)
        if (
            bf16 is None
            or q.dim() != 3
            or k.dim() != 3
            or cos_sin.dtype != torch.float32
            or not cos_sin.is_contiguous()
            or positions.dtype != torch.int64
            or not positions.is_contiguous()
            or cos_sin.shape[1] != q.shape[2]
            or k.shape[2] != q.shape[2]
            or q.shape[2] % 2
        ):
            return reference.rotary_embedding(positions, q, k, cos_sin)
        (qs0, qs1, _), (ks0, ks1, _) = q.stride(), k.stride()
        bad = self._lib.rotary_embedding(
            positions.data_ptr(),
            q.shape[0],
            q.data_ptr(),
            qs0,
            qs1,
            q.shape[1],
            k.data_ptr(),
            ks0,
            ks1,
            k.shape[1],
            cos_sin.data_ptr(),
            cos_sin.shape[0],
            q.shape[2],
            bf16,
            torch.get_num_threads(),
        )
        if bad:
            raise IndexError(f"rotary_embedding: {bad} positions outside [0, {cos_sin.shape[0]})")

    def silu_and_mul(self, out: torch.Tensor, gate_up: torch.Tensor) -> None:
        bf16 = _kind(out, gate_up)
        d = out.shape[-1]
        if bf16 is None or out.dim() != 2 or gate_up.shape != (out.shape[0], 2 * d):
            return reference.silu_and_mul(out, gate_up)
        self._lib.silu_and_mul(
            out.data_ptr(),
            out.stride()[0],
            gate_up.data_ptr(),
            gate_up.stride()[0],
            out.shape[0],
            d,
            bf16,
            torch.get_num_threads(),
        )

    def write_kv(self, key, value, k_cache, v_cache, slot_mapping) -> None:
        if (
            _kind(key, value, k_cache, v_cache) is None
            or k_cache.stride() != v_cache.stride()
            or key.shape != value.shape
            or key.shape[1:] != k_cache.shape[2:]
            or slot_mapping.dtype != torch.int64
            or not slot_mapping.is_contiguous()
        ):
            return reference.write_kv(key, value, k_cache, v_cache, slot_mapping)
        nb, bs, heads, dim = k_cache.shape
        cb, cs, ch, _ = k_cache.stride()
        (ks0, ks1, _), (vs0, vs1, _) = key.stride(), value.stride()
        bad = self._lib.write_kv(
            key.data_ptr(),
            ks0,
            ks1,
            value.data_ptr(),
            vs0,
            vs1,
            k_cache.data_ptr(),
            v_cache.data_ptr(),
            cb,
            cs,
            ch,
            slot_mapping.data_ptr(),
            key.shape[0],
            heads,
            dim,
            bs,
            nb * bs,
            key.element_size(),
            torch.get_num_threads(),
        )
        if bad:
            raise IndexError(f"write_kv: {bad} slots outside the cache's {nb * bs}")


def _vector(weight: torch.Tensor, x: torch.Tensor) -> bool:
    return weight.dim() == 1 and weight.shape[0] == x.shape[-1] and weight.is_contiguous()


def load() -> CpuLayerOps | None:
    """The compiled library (built into the cache on first use), or None where it cannot build."""
    library = load_library(SOURCE, FLAGS, "using the pure-torch twins")
    return CpuLayerOps(library) if library is not None else None
