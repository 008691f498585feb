"""A weight kept in a low-bit format: group-wise codes with fp16 scales (and mins).

``value[n, k] = (code[n, k] - zero) * scale[n, k // group] + min[n, k // group]``

The K-quants keep theirs as the file does: an int8 per group times an fp16 per 256 weights
(``super_scales``, ``super_mins``), a product exact in fp32, so the values are the file's and the
scales cost a byte a group.

The codes are stored once, at load, in the packed layout the C kernel reads
(``csrc/quant_linear.c``): strips of 16 output channels, k pairs lane-major; 8-bit codes as int8,
4-6 bit codes as a nibble plane plus their bits above 4 (``_high_bits``). That covers GGUF's Q8_0,
Q4_0/Q4_1, Q5_0/Q5_1 and the K-quants (Q4_K, Q5_K, Q6_K) at about their file size, and every
row can be dequantized from it (embedding lookups; the pure-torch reference linear).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

STRIP = 16
BITS = (4, 5, 6, 8)
GROUPS = (16, 32)
SUPER = 256  # weights per super-block scale


@dataclass(frozen=True, slots=True)
class QuantizedWeight:
    """``shape`` is the logical ``[N, K]`` (N may be padded to a multiple of 16 in the planes)."""

    shape: tuple[int, int]
    bits: int
    group: int
    zero: int
    codes: torch.Tensor  # bits 8: int8 [S, K/2, 32]; else uint8 nibbles [S, K/4, 32]
    planes: torch.Tensor | None  # bits 5, 6: ``_high_bits``, int32 [S, K/2, bits - 4]
    scales: torch.Tensor  # fp16 [S, K/group, 16]; int8 with super_scales
    mins: torch.Tensor | None  # the same as scales, with super_mins
    super_scales: torch.Tensor | None = None  # fp16 [S, K/256, 16]
    super_mins: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        parts = (
            self.codes,
            self.planes,
            self.scales,
            self.mins,
            self.super_scales,
            self.super_mins,
        )
        return sum(t.numel() * t.element_size() for t in parts if t is not None)

    def rows(self, ids: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Rows ``ids`` ([T] int) dequantized: ``[T, K]``."""
        strip, lane = ids // STRIP, ids % STRIP

        def per_k(groups: torch.Tensor, supers: torch.Tensor | None) -> torch.Tensor:
            out = groups[strip, :, lane].float()  # [T, K/group]
            if supers is not None:
                out *= supers[strip, :, lane].float().repeat_interleave(SUPER // self.group, 1)
            return out.repeat_interleave(self.group, dim=1)

        out = (self.codes_of(ids) - self.zero).float() * per_k(self.scales, self.super_scales)
        if self.mins is not None:
            out += per_k(self.mins, self.super_mins)
        return out.to(dtype)

    def codes_of(self, ids: torch.Tensor) -> torch.Tensor:
        """The codes of rows ``ids`` as stored (int32 ``[T, K]``, ``pack``'s input)."""
        k = self.shape[1]
        strip, lane = ids // STRIP, ids % STRIP
        if self.bits == 8:
            codes = self.codes.view(-1, k // 2, STRIP, 2)[strip, :, lane, :].reshape(-1, k).int()
        else:
            nib = self.codes.view(-1, k // 4, STRIP, 2)[strip, :, lane, :].int()  # [T, K/4, 2]
            codes = torch.stack((nib & 15, nib >> 4), dim=2).reshape(-1, k)  # [T, K]
            if self.planes is not None:
                hb = self.bits - 4
                per = 8 // hb  # quads per vector of high bits
                vecs = self.planes.view(torch.uint8).reshape(-1, k // 4 // per, STRIP, 4)
                mine = vecs[strip, :, lane, :].int().unsqueeze(2)  # [T, K/4/per, 1, 4]
                shift = (torch.arange(per) * hb).view(1, 1, per, 1)
                codes = codes | (((mine >> shift) & ((1 << hb) - 1)).reshape(-1, k) << 4)
        return codes

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The whole weight ``[N, K]``."""
        return self.rows(torch.arange(self.shape[0]), dtype)


def pack(
    codes: np.ndarray,
    scales: np.ndarray,
    mins: np.ndarray | None,
    bits: int,
    group: int,
    zero: int,
    super_scales: np.ndarray | None = None,
    super_mins: np.ndarray | None = None,
) -> QuantizedWeight:
    """``codes`` [N, K] (int8 for 8 bits, else uint8 in 0..2**bits-1), ``scales``/``mins``
    [N, K/group] (cast to fp16) -> the packed weight. With ``super_scales`` (and ``super_mins``,
    [N, K/256] fp16 values) each scale (min) must be its super-block's value times an int8,
    which is what is kept."""
    n, k = codes.shape
    if bits not in BITS or group not in GROUPS or k % 32 or scales.shape != (n, k // group):
        raise ValueError(f"cannot pack {bits}-bit codes of shape {codes.shape}, group {group}")
    if super_scales is not None and (k % SUPER or super_scales.shape != (n, k // SUPER)):
        raise ValueError(f"super-block scales of shape {super_scales.shape} for {codes.shape}")
    pad = -n % STRIP
    if pad:
        codes = np.pad(codes, ((0, pad), (0, 0)), constant_values=zero if bits < 8 else 0)
    s = codes.shape[0] // STRIP
    vec = _lane_major(codes, s, k)  # [S, K/2, 32]
    planes = None
    if bits == 8:
        packed = vec.view(np.int8)
    else:
        quad = vec.reshape(s, k // 4, 2, 32)
        packed = (quad[:, :, 0] & 15) | ((quad[:, :, 1] & 15) << 4)  # [S, K/4, 32]
        if bits > 4:
            planes = torch.from_numpy(_high_bits(vec, bits))
    if mins is None:
        super_mins = None
    if super_scales is not None:
        scales = _sub_scales(scales, super_scales, group)
        mins = _sub_scales(mins, super_mins, group)
    sc, mn, sup_sc, sup_mn = (
        None if a is None else _strips(a, pad) for a in (scales, mins, super_scales, super_mins)
    )
    return QuantizedWeight(
        (n, k), bits, group, zero, torch.from_numpy(np.ascontiguousarray(packed)), planes,
        sc, mn, sup_sc, sup_mn,
    )  # fmt: skip


def _sub_scales(a: np.ndarray | None, supers: np.ndarray | None, group: int) -> np.ndarray | None:
    """``a`` [N, K/group] as int8 multiples of ``supers`` [N, K/256] (exact, or ValueError)."""
    if a is None:
        return None
    per = np.repeat(supers.astype(np.float16).astype(np.float32), SUPER // group, axis=1)
    sub = np.rint(np.divide(a, per, out=np.zeros_like(a, np.float32), where=per != 0))
    if not (-128 <= sub).all() or not (sub <= 127).all() or not np.array_equal(sub * per, a):
        raise ValueError("scales that are not an int8 times their super-block scale")
    return sub.astype(np.int8)


def _lane_major(codes: np.ndarray, s: int, k: int) -> np.ndarray:
    """1-byte ``codes`` [S*16, K] -> [S, K/2, 32] of the same dtype: strips of 16 rows, k pairs
    lane-major. A k pair moves as one 16-bit element (a fraction of a byte-wise transpose)."""
    pairs = np.ascontiguousarray(codes).view(np.int16).reshape(s, STRIP, k // 2)
    lanes = np.ascontiguousarray(pairs.transpose(0, 2, 1))  # [S, K/2, 16] pairs
    return lanes.view(codes.dtype).reshape(s, k // 2, 32)


def _high_bits(vec: np.ndarray, bits: int) -> np.ndarray:
    """The bits above 4 of ``vec``'s codes ([S, K/2, 32] pair vectors) in the int8 kernel's quad
    order (byte 4n + e of quad q: channel n, k = 4q + e), ``per`` = 8 // (bits - 4) quads to a
    vector of 64 bytes: byte j of vector h holds quad h * per + i's byte j at bit i * (bits - 4),
    so a quad's high bits are one shift and mask of its vector. As int32 [S, K/2, bits - 4]: the
    bytes a bit plane per bit would take."""
    s, half, _ = vec.shape
    hb = bits - 4
    per = 8 // hb
    quads = vec.reshape(s, half // 2, 2, STRIP, 2).transpose(0, 1, 3, 2, 4)  # [S, K/4, 16, 2, 2]
    high = (quads.reshape(s, half // 2 // per, per, 64) >> 4).astype(np.uint8)
    packed = np.zeros((s, half // 2 // per, 64), np.uint8)
    for i in range(per):
        packed |= high[:, :, i] << (i * hb)
    return packed.view("<i4").reshape(s, half, hb)


def _strips(a: np.ndarray, pad: int) -> torch.Tensor:
    """[N, G] -> [S, G, 16] (int8 kept, else fp16)."""
    a = np.pad(a if a.dtype == np.int8 else a.astype(np.float16), ((0, pad), (0, 0)))
    return torch.from_numpy(
        np.ascontiguousarray(a.reshape(-1, STRIP, a.shape[1]).transpose(0, 2, 1))
    )


def concat(parts: list[QuantizedWeight]) -> QuantizedWeight | None:
    """The row-wise concatenation of ``parts`` (None when their formats differ or a part is padded)."""

    def key(p: QuantizedWeight) -> tuple:
        return p.bits, p.group, p.zero, p.mins is None, p.super_scales is None, p.shape[1]

    first = parts[0]
    if any(key(p) != key(first) or p.shape[0] % STRIP for p in parts):
        return None

    def cat(ts):
        return None if ts[0] is None else torch.cat(ts)

    return QuantizedWeight(
        (sum(p.shape[0] for p in parts), first.shape[1]),
        first.bits,
        first.group,
        first.zero,
        cat([p.codes for p in parts]),
        cat([p.planes for p in parts]),
        cat([p.scales for p in parts]),
        cat([p.mins for p in parts]),
        cat([p.super_scales for p in parts]),
        cat([p.super_mins for p in parts]),
    )


@dataclass(frozen=True, slots=True)
class SplitWeight:
    """A fused projection whose parts are stored in different formats (e.g. a Q4_K_M file's q/k
    in Q4_K and v in Q6_K): the linear runs per part and concatenates the outputs."""

    parts: tuple[QuantizedWeight, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return sum(p.shape[0] for p in self.parts), self.parts[0].shape[1]

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def rows(self, ids: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return self.dequantize(dtype)[ids]

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.cat([p.dequantize(dtype) for p in self.parts])


def is_quantized(weight: object) -> bool:
    return isinstance(weight, (QuantizedWeight, SplitWeight))
