"""GGUF files -> a cached safetensors HF directory (converted once, dequantized to float32)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

from stencil.engine.errors import ConfigError
from stencil.paths import cache_root

logger = logging.getLogger(__name__)


def convert_gguf(gguf_path: Path, out_dir: Path | None = None) -> Path:
    """Convert ``gguf_path`` once into an HF directory (config, safetensors, tokenizer) and return it."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise ConfigError(f"GGUF file not found: {gguf_path}")
    if out_dir is None:
        digest = hashlib.sha256(f"{gguf_path.resolve()}:{gguf_path.stat().st_size}".encode()).hexdigest()
        out_dir = cache_root() / "gguf" / f"{gguf_path.stem}-{digest[:12]}"
    if (out_dir / "config.json").is_file():
        return out_dir
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _convert_into(gguf_path, tmp)
    except Exception as e:
        raise ConfigError(f"cannot convert GGUF file {gguf_path.name}: {type(e).__name__}: {e}") from e
    finally:
        if not (tmp / "config.json").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return out_dir


def _convert_into(gguf_path: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    logger.info("converting %s to safetensors (once) ...", gguf_path.name)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    config["torch_dtype"] = "float32"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if config.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(str(out))
    gen = GenerationConfig.from_model_config(model.config)
    gen.save_pretrained(str(out))
