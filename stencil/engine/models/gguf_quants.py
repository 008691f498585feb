"""GGUF's quantized blocks -> group-wise codes, scales and mins (``kernels.quant_weight.pack``).

Block layouts are ggml's (``ggml-quants.c``, ``dequantize_row_*``); every decoding is checked
against ``gguf.quants.dequantize`` in ``tests/engine/test_gguf_quants.py``. Q8_0, Q4_0, Q4_1, Q5_0
and Q5_1 map exactly (fp16 scale and min per 32). The K-quants' per-sub-block scale is ``d * sc``
(an fp16 super-block scale times a 6-8 bit integer), exact in fp32, and kept as the file keeps it:
``super_scales`` (``d``, and ``super_mins``, ``-dmin``) per 256 weights, the integers in ``pack``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stencil.engine.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Codes:
    """``value = (codes - zero) * scales[:, k // group] + mins[:, k // group]``."""

    codes: np.ndarray  # [N, K] int8 (bits 8) or uint8
    scales: np.ndarray  # [N, K / group] float32
    mins: np.ndarray | None
    bits: int
    group: int
    zero: int
    super_scales: np.ndarray | None = None  # [N, K / 256] float32: scales = super * an integer
    super_mins: np.ndarray | None = None


SUPPORTED = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "MXFP4")
# MXFP4's e2m1 values, doubled (ggml's kvalues_mxfp4): integers, so 8-bit codes hold them exactly
_E2M1_X2 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)


def decode(raw: np.ndarray, qtype: str, shape: tuple[int, int]) -> Codes:
    """``raw``: the tensor's bytes (uint8, any shape), ``shape`` the logical ``[N, K]``."""
    n, k = shape
    if qtype not in SUPPORTED:
        raise ConfigError(f"GGUF type {qtype} cannot be kept quantized")
    b = np.ascontiguousarray(raw).reshape(n, -1)  # [N, bytes per row]
    return globals()[f"_{qtype.lower()}"](b, n, k)


def _mxfp4(b, n, k):
    """GPT-OSS's experts: per 32 weights an E8M0 exponent byte and 16 bytes of e2m1 nibbles
    (Q4_0's layout); value = e2m1 * 2^(e - 127). Kept as 8-bit codes (the doubled e2m1 value)
    with scale 2^(e - 128) in fp16: exact, at twice the file's bytes (Q8_0's kernel runs them)."""
    x = _blocks(b, n, 17)
    codes = _E2M1_X2[_nibbles(x[..., 1:])].reshape(n, k)
    e = x[..., 0].astype(np.int32) - 128  # [N, K / 32]
    empty = ~codes.reshape(n, -1, 32).any(-1)  # all-zero blocks: any scale will do
    if not ((e >= -24) & (e <= 15) | empty).all():
        raise ConfigError("MXFP4 block scales beyond fp16's exact range (2^-24 .. 2^15)")
    return Codes(
        codes, np.ldexp(np.float32(1), np.where(empty, 0, e)).astype(np.float32), None, 8, 32, 0
    )


def _f16(b: np.ndarray, lo: int) -> np.ndarray:
    return np.ascontiguousarray(b[..., lo : lo + 2]).view(np.float16)[..., 0].astype(np.float32)


def _blocks(b: np.ndarray, n: int, size: int) -> np.ndarray:
    return b.reshape(n, -1, size)  # [N, blocks, bytes]


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """ggml's 32-weight nibble layout: byte j holds weights j (low) and j + 16 (high)."""
    return np.concatenate((qs & 15, qs >> 4), axis=-1)  # [..., 32]


def _q8_0(b, n, k):
    x = _blocks(b, n, 34)
    codes = np.ascontiguousarray(x[..., 2:]).view(np.int8).reshape(n, k)
    return Codes(codes, _f16(x, 0), None, 8, 32, 0)


def _q4_0(b, n, k):
    x = _blocks(b, n, 18)
    return Codes(_nibbles(x[..., 2:]).reshape(n, k), _f16(x, 0), None, 4, 32, 8)


def _q4_1(b, n, k):
    x = _blocks(b, n, 20)
    return Codes(_nibbles(x[..., 4:]).reshape(n, k), _f16(x, 0), _f16(x, 2), 4, 32, 0)


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """Q5_0/Q5_1: bit j of the little-endian uint32 ``qh`` is bit 4 of weight j."""
    word = np.ascontiguousarray(qh).view("<u4")  # [..., 1]
    return (((word >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.uint8)  # [..., 32]


def _q5_0(b, n, k):
    x = _blocks(b, n, 22)
    codes = _nibbles(x[..., 6:]) | _high_bits(x[..., 2:6])
    return Codes(codes.reshape(n, k), _f16(x, 0), None, 5, 32, 16)


def _q5_1(b, n, k):
    x = _blocks(b, n, 24)
    codes = _nibbles(x[..., 8:]) | _high_bits(x[..., 4:8])
    return Codes(codes.reshape(n, k), _f16(x, 0), _f16(x, 2), 5, 32, 0)


def _scale_min_k4(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's get_scale_min_k4 for the 8 sub-blocks: ``q`` [..., 12] -> two [..., 8] arrays."""
    q = q.astype(np.uint8)
    sc = np.concatenate((q[..., 0:4] & 63, (q[..., 8:12] & 15) | ((q[..., 0:4] >> 6) << 4)), -1)
    mn = np.concatenate((q[..., 4:8] & 63, (q[..., 8:12] >> 4) | ((q[..., 4:8] >> 6) << 4)), -1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _k_codes(codes: np.ndarray, x: np.ndarray, bits: int) -> Codes:
    """Q4_K / Q5_K: ``codes`` [N, K] and the blocks ``x`` (d, dmin, the packed 6-bit scales)."""
    n = codes.shape[0]
    sc, mn = _scale_min_k4(x[..., 4:16])  # [N, blocks, 8]
    d, neg_dmin = _f16(x, 0), -_f16(x, 2)
    scales, mins = d[..., None] * sc, neg_dmin[..., None] * mn
    return Codes(codes, scales.reshape(n, -1), mins.reshape(n, -1), bits, 32, 0, d, neg_dmin)


def _q4_k(b, n, k):
    x = _blocks(b, n, 144)
    qs = x[..., 16:].reshape(n, -1, 4, 32)  # [N, blocks, 64-chunk, 32]
    codes = np.stack((qs & 15, qs >> 4), axis=3)  # [N, blocks, chunk, 2 sub-blocks, 32]
    return _k_codes(codes.reshape(n, k), x, 4)


def _q5_k(b, n, k):
    x = _blocks(b, n, 176)
    qh = x[..., 16:48][:, :, None, None, :]  # [N, blocks, 1, 1, 32]
    qs = x[..., 48:].reshape(n, -1, 4, 32)
    codes = np.stack((qs & 15, qs >> 4), axis=3)  # [N, blocks, chunk, 2, 32]
    shift = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)  # [chunk, 2]
    codes = codes | (((qh >> shift[..., None]) & 1) << 4)
    return _k_codes(codes.reshape(n, k), x, 5)


def _q6_k(b, n, k):
    x = _blocks(b, n, 210)
    ql = x[..., :128].reshape(n, -1, 2, 2, 32)  # [N, blocks, 128-half, l-half (+0/+32), 32]
    qh = x[..., 128:192].reshape(n, -1, 2, 1, 32)
    low = np.stack((ql & 15, ql >> 4), axis=3)  # [N, blocks, half, nibble, l-half, 32]
    shift = (2 * (np.arange(2)[:, None] * 2 + np.arange(2)[None, :])).astype(np.uint8)
    high = (
        qh[:, :, :, None] >> shift[None, None, None, :, :, None]
    ) & 3  # [.., nibble, l-half, 32]
    codes = low | (high << 4)  # element order: half, nibble (+64), l-half (+32), l
    sc = np.ascontiguousarray(x[..., 192:208]).view(np.int8).astype(np.float32)  # [N, blocks, 16]
    d = _f16(x, 208)
    scales = d[..., None] * sc
    return Codes(codes.reshape(n, k), scales.reshape(n, -1), None, 6, 16, 32, d)
