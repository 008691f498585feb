"""Build the model with weights kept quantized: GGUF blocks as stored, or float weights quantized
weight-only at load (``quantization="int8"``: 8-bit codes, an fp16 scale per 32 — Q8_0's format;
``"int4"``: 4-bit codes, an fp16 scale and min per 32 — Q4_1's format — with the embedding and
lm_head at int8). Only the dense rest (norms, biases, float tensors) is allocated in the model's
dtype; a quantized weight replaces its module's ``weight`` parameter."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch

from stencil.engine.errors import ConfigError
from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.gguf_quants import Codes
from stencil.engine.models.registry import build
from stencil.engine.models.weight_map import fused_parts, map_weight
from stencil.kernels.quant_weight import QuantizedWeight, SplitWeight, concat, pack

Weight = np.ndarray | Codes
_EMBEDDINGS = ("model.embed_tokens.weight", "lm_head.weight")


def quantize_dense(w: np.ndarray, bits: int) -> Codes:
    """Round-to-nearest group-wise quantization of ``w`` [N, K] (K a multiple of 32)."""
    n, k = w.shape
    g = w.reshape(n, k // 32, 32).astype(np.float32)
    if bits == 8:
        d = (np.abs(g).max(-1) / 127).astype(np.float16).astype(np.float32)  # [N, K/32]
        q = np.rint(np.divide(g, d[..., None], out=np.zeros_like(g), where=d[..., None] > 0))
        return Codes(np.clip(q, -127, 127).astype(np.int8).reshape(n, k), d, None, 8, 32, 0)
    lo = g.min(-1).astype(np.float16).astype(np.float32)
    d = ((g.max(-1) - lo) / 15).astype(np.float16).astype(np.float32)
    q = np.rint(
        np.divide(g - lo[..., None], d[..., None], out=np.zeros_like(g), where=d[..., None] > 0)
    )
    return Codes(np.clip(q, 0, 15).astype(np.uint8).reshape(n, k), d, lo, 4, 32, 0)


def dequantize_codes(c: Codes) -> np.ndarray:
    """The values ``pack(c)`` holds: scales and mins as fp16 (exact with super-block scales)."""

    def kept(a: np.ndarray) -> np.ndarray:
        a = a if c.super_scales is not None else a.astype(np.float16).astype(np.float32)
        return np.repeat(a, c.group, axis=1)

    out = (c.codes.astype(np.float32) - c.zero) * kept(c.scales)
    if c.mins is not None:
        out += kept(c.mins)
    return out


def quantize_weights(
    weights: Iterable[tuple[str, np.ndarray]], mode: str
) -> Iterator[tuple[str, Weight]]:
    """``mode`` "int8" / "int4": the projections (and embedding / lm_head, at int8) quantized."""
    for name, w in weights:
        quantizable = w.ndim == 2 and w.shape[1] % 32 == 0 and name.endswith("weight")
        if quantizable and ("_proj." in name or name in _EMBEDDINGS):
            bits = 8 if mode == "int8" or name in _EMBEDDINGS else 4
            yield name, quantize_dense(w, bits)
        else:
            yield name, w


def build_model(
    config,
    weights: Iterable[tuple[str, Weight]],
    dtype: torch.dtype,
    device: torch.device,
    max_positions: int,
) -> DecoderForCausalLM:
    """The model from HF-named weights, fused projections concatenated."""

    if device.type != "cpu":
        raise ConfigError(
            f"quantized weights run on CPU only; use quantization='none' on {device.type}"
        )
    with torch.device("meta"):
        model = build(config, max_positions)
    shards: dict[str, dict[int, Weight]] = {}
    dense: dict[str, np.ndarray] = {}
    params = dict(model.named_parameters())
    for name, data in weights:
        for target, item, part in map_weight(name, data, config):
            if target not in params:
                raise ConfigError(f"unexpected weight {target}")
            if part is None:
                _place(model, dense, target, [item])
                continue
            shards.setdefault(target, {})[part] = item
            if len(shards[target]) == fused_parts(target):
                got = shards.pop(target)
                _place(model, dense, target, [got[i] for i in range(len(got))])
    model = model.to_empty(device=device).to(dtype)
    params = dict(model.named_parameters())
    for target, value in dense.items():
        params[target].data.copy_(torch.from_numpy(value))
    missing = set(params) - set(dense)
    if missing or shards:
        raise ConfigError(f"weights missing: {sorted(missing | set(shards))[:5]}")
    model.init_rope()
    return model.eval()


def _place(
    model: torch.nn.Module, dense: dict[str, np.ndarray], target: str, parts: list[Weight]
) -> None:
    if not all(isinstance(p, Codes) for p in parts):  # float or mixed: dense, exact
        arrays = [dequantize_codes(p) if isinstance(p, Codes) else p for p in parts]
        dense[target] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        return
    packed = [
        pack(p.codes, p.scales, p.mins, p.bits, p.group, p.zero, p.super_scales, p.super_mins)
        for p in parts
    ]
    weight: QuantizedWeight | SplitWeight | None = packed[0] if len(packed) == 1 else concat(packed)
    if weight is None:
        weight = SplitWeight(tuple(packed))
    module_name, attr = target.rsplit(".", 1)
    module = model.get_submodule(module_name)
    delattr(module, attr)
    setattr(module, attr, weight)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of every weight the model holds: parameters (oneDNN-packed ones by their dense size),
    panel-packed and quantized weights, each shared one once."""
    from stencil.kernels.panel_linear import PanelWeight
    from stencil.kernels.quant_weight import is_quantized

    seen: dict[int, int] = {}
    for module in model.modules():
        for value in vars(module).values():
            if is_quantized(value) or isinstance(value, PanelWeight):
                seen[id(value)] = value.nbytes
        for p in module.parameters(recurse=False):
            seen[id(p)] = p.numel() * p.element_size()
    return sum(seen.values())
