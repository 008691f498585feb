"""A stack of Llama-shaped decoder layers in one C call (``csrc/layer_loop.c``): the int8-row
quantized linear, the layer ops and the paged-attention kernel called from C in the order the
Python layers call them, so the output is theirs bit for bit while a decode step makes one call
instead of ~10 per layer (each 2-8 µs of Python and ctypes around a kernel that runs for 1-100 µs
at one row).

It takes fp32 activations and caches, quantized weights whose output channels fill whole strips
(no padding; a ``SplitWeight`` of up to three such parts too), full-width rotary tables and no
sliding window; ``LayerLoop.supports`` says whether a weight qualifies, and the engine keeps the
per-layer Python path for everything else.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

from stencil.kernels.cpu_attention import FLAGS, CpuPagedAttention, _fits, _launch
from stencil.kernels.cpu_layer_ops import CpuLayerOps
from stencil.kernels.cpu_quant import CpuQuantLinear, _ptr, _scale_pointers
from stencil.kernels.quant_weight import QuantizedWeight, SplitWeight
from stencil.paths import load_library

SOURCE = Path(__file__).parent / "csrc" / "layer_loop.c"
_P, _I, _L, _F = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
MAX_PARTS = 3  # layer_loop.c's


class _Ops(ctypes.Structure):
    _fields_ = [
        (n, _P)
        for n in ("qlinear", "rms_norm", "add_norm", "rotary", "silu", "write_kv", "attention")
    ]


class _Part(ctypes.Structure):
    _fields_ = [
        ("N", _L),
        ("K", _I),
        ("bits", _I),
        ("G", _I),
        ("zero", _I),
        ("codes", _P),
        ("planes", _P),
        ("scales", _P),
        ("mins", _P),
        ("sup_s", _P),
        ("sup_m", _P),
    ]


class _Linear(ctypes.Structure):
    _fields_ = [("N", _L), ("num_parts", _I), ("part", _Part * MAX_PARTS), ("bias", _P)]


class _Layer(ctypes.Structure):
    _fields_ = [
        ("input_norm", _P),
        ("post_norm", _P),
        ("qkv", _Linear),
        ("o", _Linear),
        ("gate_up", _Linear),
        ("down", _Linear),
        ("k_cache", _P),
        ("v_cache", _P),
    ]


class _Shape(ctypes.Structure):
    _fields_ = [
        ("hidden", _I),
        ("heads", _I),
        ("kv_heads", _I),
        ("dim", _I),
        ("inter", _I),
        ("eps", _F),
        ("scale", _F),
        ("cos_sin", _P),
        ("max_pos", _L),
        ("cb", _L),
        ("cs", _L),
        ("ch", _L),
        ("block_size", _L),
        ("num_slots", _L),
    ]


class _Step(ctypes.Structure):
    _fields_ = [
        ("tokens", _L),
        ("positions", _P),
        ("slots", _P),
        ("tables", _P),
        ("cu", _P),
        ("ctx", _P),
        ("units", _P),
        ("width", _I),
        ("num_units", _I),
    ]


class _Scratch(ctypes.Structure):
    _fields_ = [(n, _P) for n in ("x", "r", "qkv", "attn", "gate_up", "act", "part")]


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """One decoder layer as the loop reads it (biases may be None)."""

    input_norm: torch.Tensor  # [hidden] fp32
    post_norm: torch.Tensor
    qkv: tuple[QuantizedWeight | SplitWeight, torch.Tensor | None]
    o: tuple[QuantizedWeight | SplitWeight, torch.Tensor | None]
    gate_up: tuple[QuantizedWeight | SplitWeight, torch.Tensor | None]
    down: tuple[QuantizedWeight | SplitWeight, torch.Tensor | None]
    kv_cache: tuple[torch.Tensor, torch.Tensor]  # [blocks, block_size, kv_heads, dim] views


@dataclass(slots=True)
class Stack:
    """The ctypes image of a model's layers (the tensors it points into are kept alive here)."""

    layers: ctypes.Array
    shape: _Shape
    sizes: tuple[int, int, int, int, int]  # hidden, heads * dim, qkv, inter, widest split part
    caches: tuple[torch.Tensor, torch.Tensor]  # the first layer's (every layer's share a layout)
    keep: tuple


class LayerLoop:
    def __init__(self, library, quant: CpuQuantLinear, ops: CpuLayerOps, attention) -> None:
        self._run = library.layer_loop
        self._run.argtypes = [_P, _P, _I, _P, _P, _P, _I]
        self._run.restype = _I
        lib = ops._lib
        addr = [
            quant._i8,
            lib.rms_norm,
            lib.fused_add_rms_norm,
            lib.rotary_embedding,
            lib.silu_and_mul,
            lib.write_kv,
            attention._kernel,
        ]
        self._ops = _Ops(*(ctypes.cast(f, _P).value for f in addr))

    @staticmethod
    def supports(weight, bias=None) -> bool:
        """Whether the loop reads this linear: quantized (or split in up to three quantized
        parts), whole 16-channel strips, K in blocks of 32, an fp32 bias or none."""
        parts = _parts(weight)
        return (
            0 < len(parts) <= MAX_PARTS
            and all(
                isinstance(p, QuantizedWeight)
                and p.scales.shape[0] * 16 == p.shape[0]
                and p.shape[1] % 32 == 0
                for p in parts
            )
            and (bias is None or bias.dtype == torch.float32)
        )

    def stack(
        self,
        layers: list[LayerWeights],
        heads: int,
        eps: float,
        scale: float,
        cos_sin: torch.Tensor,
    ) -> Stack | None:
        """The ctypes image of ``layers`` (built once; the caches must not move), or None where
        the attention kernel does not take their caches."""
        k_cache, v_cache = layers[0].kv_cache
        nb, bs, kv_heads, dim = k_cache.shape
        if not _fits(k_cache, v_cache, bs, dim, heads // kv_heads):
            return None
        keep: list = [cos_sin]
        arr = (_Layer * len(layers))()
        for dst, lw in zip(arr, layers, strict=True):
            dst.input_norm, dst.post_norm = lw.input_norm.data_ptr(), lw.post_norm.data_ptr()
            for name in ("qkv", "o", "gate_up", "down"):
                setattr(dst, name, _linear(*getattr(lw, name), keep))
            dst.k_cache, dst.v_cache = (c.data_ptr() for c in lw.kv_cache)
            keep += [lw]
        first = layers[0]
        cb, cs, ch, _ = k_cache.stride()
        hidden, inter = first.input_norm.shape[0], first.down[0].shape[1]
        shape = _Shape(
            hidden,
            heads,
            kv_heads,
            dim,
            inter,
            eps,
            scale,
            cos_sin.data_ptr(),
            cos_sin.shape[0],
            cb,
            cs,
            ch,
            bs,
            nb * bs,
        )
        split = [
            p.shape[0]
            for lw in layers
            for w, _ in (lw.qkv, lw.o, lw.gate_up, lw.down)
            if isinstance(w, SplitWeight)
            for p in w.parts
        ]
        sizes = (hidden, heads * dim, first.qkv[0].shape[0], inter, max(split, default=0))
        return Stack(arr, shape, sizes, first.kv_cache, tuple(keep))

    def __call__(
        self,
        stack: Stack,
        embedded: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        block_tables: torch.Tensor,
        cu_seqlens_q: list[int],
        context_lens: list[int],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``embedded [T, hidden]`` fp32 through every layer: ``(x, residual)`` before the final
        norm (``residual`` is ``embedded``, updated in place)."""
        hidden, qd, nqkv, inter, split = stack.sizes
        t = embedded.shape[0]
        r = embedded.contiguous()
        x, qkv, attn = torch.empty(t, hidden), torch.empty(t, nqkv), torch.empty(t, qd)
        gate_up, act, part = torch.empty(t, 2 * inter), torch.empty(t, inter), torch.empty(t, split)
        q_view = qkv[:, :qd].view(t, stack.shape.heads, stack.shape.dim)
        launch = _launch(q_view, *stack.caches, block_tables, cu_seqlens_q, context_lens)
        tables, cu, ctx, units = launch.tensors
        step = _Step(
            t,
            positions.data_ptr(),
            slots.data_ptr(),
            tables.data_ptr(),
            cu.data_ptr(),
            ctx.data_ptr(),
            units.data_ptr(),
            tables.shape[1],
            units.shape[0],
        )
        scratch = _Scratch(*(a.data_ptr() for a in (x, r, qkv, attn, gate_up, act, part)))
        status = self._run(
            ctypes.byref(self._ops),
            stack.layers,
            len(stack.layers),
            ctypes.byref(stack.shape),
            ctypes.byref(step),
            ctypes.byref(scratch),
            torch.get_num_threads(),
        )
        if status == -1:
            raise MemoryError(f"layer loop: no scratch memory for {t} rows")
        if status == -2:
            raise IndexError(f"rotary_embedding: positions outside [0, {stack.shape.max_pos})")
        if status == -3:
            raise IndexError(f"write_kv: slots outside the cache's {stack.shape.num_slots}")
        return x, r


def _parts(weight) -> tuple:
    return weight.parts if isinstance(weight, SplitWeight) else (weight,)


def _linear(weight, bias: torch.Tensor | None, keep: list) -> _Linear:
    if bias is not None:
        bias = bias.contiguous()
        keep.append(bias)
    parts = _parts(weight)
    structs = [
        _Part(
            *p.shape,
            p.bits,
            p.group,
            p.zero,
            p.codes.data_ptr(),
            _ptr(p.planes),
            *_scale_pointers(p),
        )
        for p in parts
    ]
    return _Linear(weight.shape[0], len(parts), (_Part * MAX_PARTS)(*structs), _ptr(bias))


def load(quant, ops, attention) -> LayerLoop | None:
    """The loop over these kernels, or None where one of them is not the C kernel it calls (no
    VNNI int8 linear, the torch twins, no compiler)."""
    if not (
        isinstance(quant, CpuQuantLinear)
        and quant.int8_activations
        and isinstance(ops, CpuLayerOps)
        and isinstance(attention, CpuPagedAttention)
    ):
        return None
    library = load_library(SOURCE, FLAGS, "one Python call per layer op")
    return LayerLoop(library, quant, ops, attention) if library is not None else None
