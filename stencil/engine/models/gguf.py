"""GGUF files: their config and tokenizer as a cached HF directory, their weights read as stored
(``iter_gguf_weights``) or converted once to a float32 safetensors directory (``convert_gguf``).

The weights are read with the ``gguf`` package (llama.cpp's own reader and dequantizers);
only the config and the tokenizer come from transformers' GGUF metadata readers, which need
nothing beyond transformers itself (its GGUF *model* loader needs ``accelerate``: not used)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

import numpy as np

from stencil.engine.errors import ConfigError
from stencil.engine.models.gguf_arch import (
    GLOBAL_NAMES,
    OWN_CONFIGS,
    PERMUTED_ARCHS,
    builds_config,
    hf_config,
    layer_names,
    to_hf_convention,
)
from stencil.engine.models.gguf_moe import (
    MOE_LAYER_NAMES,
    gpt_oss_config,
    moe_config,
    split_experts,
)
from stencil.engine.models.weight_map import MODEL_TYPES
from stencil.paths import cache_root

logger = logging.getLogger(__name__)

MARKER = "gguf.json"


def convert_gguf(gguf_path: Path, out_dir: Path | None = None) -> Path:
    """Convert ``gguf_path`` once into an HF directory (config, safetensors, tokenizer) and return it."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise ConfigError(f"GGUF file not found: {gguf_path}")
    if out_dir is None:
        key = f"{gguf_path.resolve()}:{gguf_path.stat().st_size}"
        digest = hashlib.sha256(key.encode()).hexdigest()
        out_dir = cache_root() / "gguf" / f"{gguf_path.stem}-{digest[:12]}"
    if (out_dir / "config.json").is_file():
        return out_dir
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _convert_into(gguf_path, tmp)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(
            f"cannot convert GGUF file {gguf_path.name}: {type(e).__name__}: {e}"
        ) from e
    finally:
        if not (tmp / "config.json").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return out_dir


def gguf_model_dir(gguf_path: Path) -> Path:
    """A cached directory with the file's config and tokenizer (no weights) and a ``gguf.json``
    marker naming the file: the loader reads the weights from the GGUF file itself."""
    gguf_path = Path(gguf_path).resolve()
    if not gguf_path.is_file():
        raise ConfigError(f"GGUF file not found: {gguf_path}")
    st = gguf_path.stat()
    digest = hashlib.sha256(f"{gguf_path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
    out = cache_root() / "gguf" / f"{gguf_path.stem}-{digest[:12]}-meta"
    if (out / MARKER).is_file():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_metadata(gguf_path, tmp)
        (tmp / MARKER).write_text(json.dumps({"path": str(gguf_path)}))
    except ConfigError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConfigError(f"cannot read GGUF file {gguf_path.name}: {type(e).__name__}: {e}") from e
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def gguf_source(model_dir: Path) -> Path | None:
    """The GGUF file a ``gguf_model_dir`` stands for (None for a plain HF directory)."""
    marker = Path(model_dir) / MARKER
    return Path(json.loads(marker.read_text())["path"]) if marker.is_file() else None


def read_gguf_tensors(gguf_path: Path, config) -> dict[str, np.ndarray]:
    """Every tensor of the file under its HF name, dequantized to float32 (numpy, row-major)."""
    return {name: data for name, data in iter_gguf_weights(gguf_path, config, keep_quantized=False)}


def iter_gguf_weights(gguf_path: Path, config, keep_quantized: bool):
    """Yield ``(hf_name, weight)``: a float32 array, or (``keep_quantized``, 2-D tensors of a
    quantized type) its ``gguf_quants.Codes``. Types that cannot be kept (or read) raise
    ConfigError naming the type and the tensor."""
    from stencil.engine.models.gguf_header import read_metadata, read_tensors

    arch = str(read_metadata(gguf_path)["general.architecture"])
    with open(gguf_path, "rb") as f:
        for t in read_tensors(gguf_path):
            name = hf_tensor_name(t.name, arch)
            if name is None:
                logger.debug("skipping GGUF tensor %s", t.name)
                continue
            data = to_hf_convention(arch, name, _decode(t, _read(f, t), keep_quantized))
            if arch in PERMUTED_ARCHS and name.endswith(("q_proj.weight", "k_proj.weight")):
                kv = "k_proj" in name
                data = _unpermute(
                    data, config.num_key_value_heads if kv else config.num_attention_heads
                )
            yield from split_experts(name, data)


def _read(f, t) -> np.ndarray:
    """The tensor's bytes, read rather than taken from the reader's memory map: mapped pages that
    a load has touched stay resident, so the file would count twice in RSS while the map lives."""
    f.seek(int(t.data_offset))
    raw = np.fromfile(f, dtype=np.uint8, count=int(t.n_bytes))
    return raw.view(t.dtype).reshape(t.data_shape)


def _decode(t, raw: np.ndarray, keep_quantized: bool):
    """One tensor's bytes -> its ``Codes`` (kept quantized) or a float32 array."""
    import gguf

    shape = tuple(reversed([int(d) for d in t.shape]))  # GGUF lists dims fastest-first
    kind = t.tensor_type.name
    if keep_quantized and len(shape) == 3 and kind not in ("F32", "F16", "BF16"):
        per = raw.reshape(shape[0], -1)  # stacked experts [E, ...]: each its own weight
        return [_decode_2d(t, per[e], kind, shape[1:]) for e in range(shape[0])]
    if keep_quantized and len(shape) == 2 and kind not in ("F32", "F16", "BF16"):
        return _decode_2d(t, raw, kind, shape)
    try:
        data = gguf.quants.dequantize(raw, t.tensor_type)
    except NotImplementedError as e:
        raise ConfigError(f"GGUF tensor {t.name} has type {kind}, which cannot be read: {e}") from e
    return np.asarray(data, dtype=np.float32).reshape(shape)


def _decode_2d(t, raw: np.ndarray, kind: str, shape: tuple[int, int]):
    from stencil.engine.models.gguf_quants import SUPPORTED, decode

    if kind not in SUPPORTED:
        raise ConfigError(
            f"GGUF tensor {t.name} has type {kind}, which Stencil cannot run quantized "
            f"(supported: F32, F16, BF16, {', '.join(SUPPORTED)}); "
            'quantization="none" dequantizes it'
        )
    return decode(raw, kind, shape)


def _unpermute(data, heads: int):
    from stencil.engine.models.gguf_quants import Codes

    if not isinstance(data, Codes):
        return unpermute_rotary(data, heads)
    rows = (data.codes, data.scales, data.mins, data.super_scales, data.super_mins)
    codes, scales, mins, super_scales, super_mins = (
        None if a is None else unpermute_rotary(a, heads) for a in rows
    )
    return Codes(codes, scales, mins, data.bits, data.group, data.zero, super_scales, super_mins)


def hf_tensor_name(gguf_name: str, arch: str = "llama") -> str | None:
    """``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight`` (None: not a weight we use)."""
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|bias)", gguf_name)
    if m:
        key = layer_names(arch).get(m[2]) or MOE_LAYER_NAMES.get(m[2])
        return f"model.layers.{m[1]}.{key}.{m[3]}" if key else None
    m = re.fullmatch(r"(\w+)\.(weight|bias)", gguf_name)
    key = GLOBAL_NAMES.get(m[1]) if m else None
    return f"{key}.{m[2]}" if key else None


def unpermute_rotary(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (per head: interleaved pairs -> two halves)."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _convert_into(gguf_path: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file

    logger.info("converting %s to safetensors (once) ...", gguf_path.name)
    config = _write_metadata(gguf_path, out)
    state = {
        k: torch.from_numpy(v).contiguous() for k, v in read_gguf_tensors(gguf_path, config).items()
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})


def _write_metadata(gguf_path: Path, out: Path):
    """config.json, tokenizer and generation config of the file into ``out``; returns the config."""
    from transformers import AutoConfig, GenerationConfig, PreTrainedTokenizerFast

    from stencil.engine.models.gguf_header import read_metadata, read_tensors

    folder, name = str(gguf_path.parent), gguf_path.name
    meta = read_metadata(
        gguf_path, tuple(f"{a}.attention.sliding_window_pattern" for a in OWN_CONFIGS)
    )
    tensors = read_tensors(gguf_path)
    names = {t.name for t in tensors}
    arch = str(meta["general.architecture"])
    if builds_config(arch, meta):
        config = _own_config(gguf_path, meta, tensors, arch)
    elif arch == "gpt-oss":  # transformers' GGUF config reader fails on its rope scaling
        embd = next(t for t in tensors if t.name == "token_embd.weight")
        config = gpt_oss_config(meta, int(embd.shape[1]))
    else:
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
    # the fast tokenizer straight from the file's vocabulary: the same tokenizer.json and chat
    # template AutoTokenizer saves, without its second read of the whole file (~10 s)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder, gguf_file=name)
    config = moe_config(config, meta, names)
    config.tie_word_embeddings = "output.weight" not in names
    raw = config.to_dict()
    raw.pop("quantization_config", None)
    raw["architectures"] = [_architecture(raw.get("model_type", ""))]
    raw["torch_dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(raw, indent=2))
    tokenizer.save_pretrained(str(out))
    GenerationConfig.from_model_config(config).save_pretrained(str(out))
    return config


def _own_config(path: Path, meta: dict, tensors, arch: str):
    """The HF config of an architecture ``gguf_arch`` reads (small tensors: LongRoPE factors)."""
    from transformers import AutoConfig

    small = {}
    with open(path, "rb") as f:
        for t in tensors:
            if t.name.startswith("rope_factors_"):
                small[t.name.removesuffix(".weight")] = _read(f, t).astype(np.float32)
    raw = hf_config(arch, meta, small)
    return AutoConfig.for_model(raw.pop("model_type"), **raw)


def _architecture(model_type: str) -> str:

    if model_type not in MODEL_TYPES:
        raise ConfigError(
            f"unsupported GGUF architecture {model_type!r}; supported: {', '.join(MODEL_TYPES)}"
        )
    return MODEL_TYPES[model_type]
