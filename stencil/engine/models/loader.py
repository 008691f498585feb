"""Resolve a model reference (None, HF directory, .gguf file, hub id) and load our model from it."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import torch

from stencil.engine.errors import ConfigError
from stencil.engine.models.decoder import DecoderForCausalLM
from stencil.engine.models.registry import MODEL_TYPES, SUPPORTED_ARCHITECTURES, build
from stencil.engine.models.weight_map import fused_parts, map_weight

logger = logging.getLogger(__name__)


def resolve_model_path(model: str | None) -> Path:
    """The local HF directory for ``model`` (None = the embedded default: its GGUF file, whose
    weights are then read as stored)."""
    from stencil.engine.models.default_model import default_model_file
    from stencil.engine.models.gguf import gguf_model_dir

    if model is None:
        return gguf_model_dir(default_model_file())
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return gguf_model_dir(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"model directory {path} has no config.json")
        return path
    if (
        path.exists()
        or model.startswith((".", "/", "~"))
        or not re.fullmatch(r"[\w.-]+/[\w.-]+", model)
    ):
        raise ConfigError(f"model path not found: {model}")
    return _from_hub(model)


def _from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(
                repo_id, allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.model", "*.txt"]
            )
        )
    except Exception as e:  # network down, repo missing, gated: one clear message
        raise ConfigError(
            f"cannot fetch model {repo_id!r} from the Hugging Face hub: {type(e).__name__}: {e}"
        ) from e


def load_config(path: Path):
    from transformers import AutoConfig

    raw = json.loads((path / "config.json").read_text())
    archs = raw.get("architectures") or [MODEL_TYPES.get(raw.get("model_type"), "")]
    if not any(a in SUPPORTED_ARCHITECTURES for a in archs):
        raise ConfigError(
            f"unsupported architecture {archs}; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return AutoConfig.from_pretrained(str(path))


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


QUANTIZATIONS = ("none", "int8", "int4")


def load_model(
    path: Path,
    config,
    dtype: torch.dtype,
    device: torch.device,
    max_positions: int,
    quantization: str | None = None,
) -> DecoderForCausalLM:
    """Build the model without initialising weights, then fill it from the safetensors files, or
    from the GGUF file a ``gguf_model_dir`` names. ``quantization`` None: a GGUF file's weights
    as stored (on CPU), safetensors as they are; "none": everything dequantized; "int8" / "int4":
    weight-only quantization at load (``models/quantized.py``)."""
    from stencil.engine.models.gguf import gguf_source, iter_gguf_weights
    from stencil.engine.models.quantized import build_model, quantize_weights

    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(
            f"quantization must be one of {QUANTIZATIONS} or None, got {quantization!r}"
        )
    source = gguf_source(path)
    if source is not None:
        keep = quantization is None and device.type == "cpu"
        weights = iter_gguf_weights(source, config, keep_quantized=keep)
        if quantization in ("int8", "int4"):
            weights = quantize_weights(weights, quantization)
        elif not keep:
            return _dense_model(config, weights, dtype, device, max_positions)
        return build_model(config, weights, dtype, device, max_positions)
    if quantization in ("int8", "int4"):
        return build_model(
            config, quantize_weights(_safetensors(path), quantization), dtype, device, max_positions
        )
    return _load_safetensors(path, config, dtype, device, max_positions)


def _safetensors(path: Path):
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"no *.safetensors files in {path}")
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name).float().numpy()


def _dense_model(config, weights, dtype, device, max_positions) -> DecoderForCausalLM:
    """All weights float (a GGUF file dequantized), filled like the safetensors path."""
    with torch.device("meta"):
        model = build(config, max_positions)
    model = model.to_empty(device=device).to(dtype)
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    pending: dict[str, torch.Tensor] = {}
    for name, data in weights:
        for target, tensor, part in map_weight(name, torch.from_numpy(data), config):
            _assign(params, pending, loaded, target, tensor, part)
    missing = set(params) - loaded
    if missing:
        raise ConfigError(f"weights missing from the GGUF file: {sorted(missing)[:5]}")
    model.init_rope()
    return model.eval()


def _load_safetensors(
    path: Path, config, dtype: torch.dtype, device: torch.device, max_positions: int
) -> DecoderForCausalLM:
    from safetensors import safe_open

    with torch.device("meta"):
        model = build(config, max_positions)
    model = model.to_empty(device=device).to(dtype)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"no *.safetensors files in {path}")
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    pending: dict[str, torch.Tensor] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                for target, tensor, part in map_weight(name, f.get_tensor(name), config):
                    _assign(params, pending, loaded, target, tensor, part)
    missing = set(params) - loaded
    if missing:
        raise ConfigError(f"weights missing from {path}: {sorted(missing)[:5]}")
    model.init_rope()
    return model.eval()


def _assign(params, pending, loaded, target, tensor, part) -> None:
    if target not in params:
        raise ConfigError(f"unexpected weight {target}")
    param = params[target]
    if part is None:
        param.data.copy_(tensor)
        loaded.add(target)
        return
    pending[f"{target}#{part}"] = tensor
    n = fused_parts(target)
    shards = [pending.get(f"{target}#{i}") for i in range(n)]
    if all(s is not None for s in shards):
        param.data.copy_(torch.cat(shards, dim=0))
        loaded.add(target)
        for i in range(n):
            del pending[f"{target}#{i}"]
