"""Paged attention on CPU through a small C kernel (``csrc/paged_attention.c``), built on first use.

The kernel reads keys and values straight from the cache blocks (no gather copy) with an online
softmax over chunks of whole blocks, prefetching the next chunk's keys while it scores the current
ones and its values while it sums the current values, one OpenMP work unit per (sequence, kv head,
tile of query positions). It is compiled once per source, compiler and CPU with the system C
compiler (``cc -O3 -march=native -fopenmp``) into ``$STENCIL_CACHE_DIR/kernels`` and opened with
ctypes. ``load()`` returns None where no compiler works; the engine then keeps the pure-torch
reference path.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

from stencil.kernels import reference
from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "paged_attention.c"
FLAGS = [
    "-O3",
    "-march=native",
    "-std=gnu11",
    "-fno-math-errno",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
    "-fopenmp",
    "-shared",
    "-fPIC",
]  # no -ffinite-math-only: -inf masks
MAX_ROWS, MAX_DIM, MAX_CHUNK = 64, 256, 64  # the C kernel's per-unit buffers
_P = ctypes.c_void_p
_ARGTYPES = [
    _P,
    ctypes.c_int64,
    _P,
    _P,
    ctypes.c_int,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    _P,
    ctypes.c_int,
    _P,
    _P,
    _P,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_float,
    ctypes.c_int,
    _P,
    _P,
    ctypes.c_int,
    ctypes.c_float,
]


class CpuPagedAttention:
    """Callable with the signature of ``reference.paged_attention``; shapes the kernel's buffers
    cannot hold (head_dim > 256, block_size > 64, > 64 query heads per kv head) and caches that
    are neither float32 nor bfloat16 go to the reference path. ``softcap`` (Gemma 2): scores
    become ``softcap * tanh(scores / softcap)`` before the mask, in the kernel."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._kernel = library.paged_attention
        self._kernel.argtypes = _ARGTYPES
        self._kernel.restype = None

    def __call__(
        self,
        q,
        k_cache,
        v_cache,
        block_tables,
        cu_seqlens_q,
        context_lens,
        scale,
        sliding_window=None,
        plan=None,
        sinks=None,
        softcap=None,
    ) -> torch.Tensor:
        plan = {} if plan is None else plan
        # every layer of a step shares the cache layout: the launch arguments are built once
        key = ("cpu", q.shape[1], k_cache.shape, k_cache.stride(), k_cache.dtype, v_cache.stride())
        key += (v_cache.dtype,)
        launch = plan.get(key)
        if launch is None:
            launch = _launch(q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens)
            plan[key] = launch = launch or False  # False: not this kernel's caches
        if not launch:
            return reference.paged_attention(
                q,
                k_cache,
                v_cache,
                block_tables,
                cu_seqlens_q,
                context_lens,
                scale,
                sliding_window,
                plan,
                sinks,
                softcap,
            )
        qf = q if q.dtype is torch.float32 else q.to(torch.float32)
        if qf.stride()[1:] != launch.q_strides:  # heads contiguous: a view into qkv needs no copy
            qf = qf.contiguous()
        out = torch.empty(q.shape, dtype=torch.float32)
        sink = None if sinks is None else sinks.to(torch.float32).contiguous()
        self._kernel(
            qf.data_ptr(),
            qf.stride()[0],
            k_cache.data_ptr(),
            v_cache.data_ptr(),
            *launch.args,
            scale,
            sliding_window or 0,
            None if sink is None else sink.data_ptr(),
            out.data_ptr(),
            torch.get_num_threads(),
            softcap or 0.0,
        )
        return out if q.dtype is torch.float32 else out.to(q.dtype)


@dataclass(frozen=True, slots=True)
class _Launch:
    """One step's kernel arguments between the caches and the scale (the tensors they point
    into are kept alive here), and the query strides the kernel reads without a copy."""

    args: tuple
    q_strides: tuple[int, int]
    tensors: tuple[torch.Tensor, ...]


def _launch(q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens) -> _Launch | None:
    """The step's launch arguments, or None where the kernel cannot take these caches."""
    _, bs, kv_heads, dim = k_cache.shape
    group = q.shape[1] // kv_heads
    if not _fits(k_cache, v_cache, bs, dim, group):
        return None
    # the C kernel trusts its indices: check the step's shapes once
    if cu_seqlens_q[-1] != q.shape[0] or max(context_lens, default=0) > block_tables.shape[1] * bs:
        raise ValueError("paged_attention: query offsets or context lengths exceed the inputs")
    cu, ctx, units = _plan(cu_seqlens_q, context_lens, group, kv_heads)
    tables = block_tables.to(torch.int32).contiguous()
    sb, ss, sh, _ = k_cache.stride()
    args = (
        int(k_cache.dtype == torch.bfloat16),
        sb,
        ss,
        sh,
        tables.data_ptr(),
        tables.shape[1],
        cu.data_ptr(),
        ctx.data_ptr(),
        units.data_ptr(),
        units.shape[0],
        q.shape[1],
        kv_heads,
        dim,
        bs,
    )
    return _Launch(args, (dim, 1), (tables, cu, ctx, units))


def _fits(k_cache, v_cache, block_size, dim, group) -> bool:
    same = k_cache.stride() == v_cache.stride() and k_cache.dtype == v_cache.dtype
    return (
        same
        and k_cache.dtype in (torch.float32, torch.bfloat16)
        and k_cache.stride(3) == 1
        and dim <= MAX_DIM
        and block_size <= MAX_CHUNK
        and group <= MAX_ROWS
    )


def _plan(cu_seqlens_q, context_lens, group, kv_heads) -> tuple[torch.Tensor, ...]:
    """Offsets, context lengths and the work units (sequence, kv head, first position, positions)."""
    tile = MAX_ROWS // group
    units = [
        (b, h, p, min(tile, cu_seqlens_q[b + 1] - cu_seqlens_q[b] - p))
        for b in range(len(context_lens))
        for p in range(0, cu_seqlens_q[b + 1] - cu_seqlens_q[b], tile)
        for h in range(kv_heads)
    ]
    units.sort(key=lambda u: -u[3] * context_lens[u[0]])  # longest first: better dynamic balance
    cu, ctx, units = (
        torch.tensor(x, dtype=torch.int32) for x in (cu_seqlens_q, context_lens, units)
    )
    return cu, ctx, units.view(-1, 4)


def load() -> CpuPagedAttention | None:
    """The compiled kernel (built into the cache on first use), or None where it cannot be built."""
    library = load_library(SOURCE, FLAGS, "using the pure-torch path")
    return CpuPagedAttention(library) if library is not None else None
