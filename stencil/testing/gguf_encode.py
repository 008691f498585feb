"""Encode float weights into GGUF blocks: ``gguf.quants.quantize`` where it can (F16, BF16, Q8_0,
Q4_0, Q4_1, Q5_0, Q5_1), and simple round-to-nearest encoders for the K-quants it cannot write
(Q4_K, Q5_K, Q6_K), following ggml's block layouts (not llama.cpp's error-minimising search:
valid blocks, somewhat larger error). Used to write model files with known weights for tests and
benchmarks; the decoders are checked against ``gguf.quants.dequantize``."""

from __future__ import annotations

import numpy as np

from stencil.engine.errors import ConfigError

QK = 256


def encode(w: np.ndarray, qtype: str) -> np.ndarray:
    """``w`` [N, K] float32 -> the tensor's bytes as ggml stores them (uint8 [N, row bytes])."""
    import gguf

    kind = gguf.GGMLQuantizationType[qtype]
    if qtype in ("Q4_K", "Q5_K", "Q6_K"):
        if w.shape[-1] % QK:
            raise ConfigError(f"{qtype} needs rows of a multiple of {QK} values, got {w.shape}")
        blocks = w.reshape(-1, QK).astype(np.float32)
        out = _q6_k(blocks) if qtype == "Q6_K" else _q45_k(blocks, 4 if qtype == "Q4_K" else 5)
        return out.reshape(w.shape[0], -1)
    return gguf.quants.quantize(w.astype(np.float32), kind)


def _f16_bytes(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).reshape(-1, 1).view(np.uint8)  # [B, 2]


def _pack_scale_min_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """Inverse of ggml's get_scale_min_k4: 8 six-bit scales and mins -> 12 bytes."""
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    q = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    q[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    q[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    q[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return q


def _q45_k(x: np.ndarray, bits: int) -> np.ndarray:
    """Q4_K / Q5_K: 8 sub-blocks of 32, ``value = d*sc*q - dmin*m`` (sc, m 6-bit, q ``bits``)."""
    top = (1 << bits) - 1
    sub = x.reshape(-1, 8, 32)
    lo = np.minimum(sub.min(-1), 0.0)  # [B, 8]
    scale = (sub.max(-1) - lo) / top
    d = scale.max(-1) / 63
    dmin = -lo.min(-1) / 63
    d16, dmin16 = (
        d.astype(np.float16).astype(np.float32),
        dmin.astype(np.float16).astype(np.float32),
    )
    sc = np.clip(
        np.rint(np.divide(scale, d16[:, None], out=np.zeros_like(scale), where=d16[:, None] > 0)),
        0,
        63,
    )
    mn = np.clip(
        np.rint(np.divide(-lo, dmin16[:, None], out=np.zeros_like(lo), where=dmin16[:, None] > 0)),
        0,
        63,
    )
    step = (d16[:, None] * sc)[..., None]  # [B, 8, 1]
    q = np.rint(
        np.divide(
            sub + (dmin16[:, None] * mn)[..., None], step, out=np.zeros_like(sub), where=step > 0
        )
    )
    q = np.clip(q, 0, top).astype(np.uint8).reshape(-1, 4, 2, 32)  # [B, chunk, sub, 32]
    head = [_f16_bytes(d), _f16_bytes(dmin), _pack_scale_min_k4(sc, mn)]
    if bits == 5:
        shift = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)[..., None]
        qh = (((q >> 4) & 1) << shift).sum(axis=(1, 2)).astype(np.uint8)  # [B, 32]
        head.append(qh)
    qs = (q[:, :, 0] & 15) | ((q[:, :, 1] & 15) << 4)  # [B, chunk, 32]
    return np.concatenate([*head, qs.reshape(-1, 128)], axis=1)


def _q6_k(x: np.ndarray) -> np.ndarray:
    """Q6_K: 16 sub-blocks of 16, ``value = d*sc*(q - 32)`` (sc int8, q 6-bit)."""
    sub = x.reshape(-1, 16, 16)
    amax = np.abs(sub).max(-1)  # [B, 16]
    scale = amax / 31
    d = scale.max(-1) / 127
    d16 = d.astype(np.float16).astype(np.float32)
    sc = np.clip(
        np.rint(np.divide(scale, d16[:, None], out=np.zeros_like(scale), where=d16[:, None] > 0)),
        -128,
        127,
    )
    step = (d16[:, None] * sc)[..., None]
    q = np.rint(np.divide(sub, step, out=np.zeros_like(sub), where=step > 0))
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 2, 2, 32)
    # element order inside a 128-half: nibble (+64), l-half (+32), l -> ql[l-half*32 + l], qh[l]
    ql = (q[:, :, 0] & 15) | ((q[:, :, 1] & 15) << 4)  # [B, half, l-half, 32]
    shift = (2 * (np.arange(2)[:, None] * 2 + np.arange(2)[None, :])).astype(np.uint8)[..., None]
    qh = (
        ((q >> 4) << shift).sum(axis=2, dtype=np.uint8).sum(axis=2, dtype=np.uint8)
    )  # [B, half, 32]
    return np.concatenate(
        [ql.reshape(-1, 128), qh.reshape(-1, 64), sc.astype(np.int8).view(np.uint8), _f16_bytes(d)],
        axis=1,
    )
