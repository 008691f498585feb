"""Where Stencil keeps what it builds once (converted models, downloads, compiled C: the CPU
kernels and the grounded strings' span walk), the build of a C source into it, and its load."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def cache_root() -> Path:
    """``$STENCIL_CACHE_DIR``, default ``~/.cache/stencil``."""
    return Path(os.environ.get("STENCIL_CACHE_DIR") or Path.home() / ".cache" / "stencil")


def build_library(source_path: Path, flags: list[str]) -> Path:
    """The shared library of ``source_path`` (compiled on first use; OSError without a compiler)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc) found")
    # the headers beside the source (its includes) are part of what is built
    headers = sorted(source_path.parent.glob("*.h"))
    source = source_path.read_bytes() + b"".join(h.read_bytes() for h in headers)
    digest = hashlib.sha256(source + " ".join([compiler, *flags]).encode() + _cpu_id()).hexdigest()[
        :16
    ]
    target = cache_root() / "kernels" / f"{source_path.stem}-{digest}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        subprocess.run(
            [compiler, *flags, str(source_path), "-o", str(built), "-lm"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        os.replace(built, target)  # atomic: concurrent builders never see a partial file
    return target


def load_library(
    source_path: Path,
    flags: list[str],
    instead: str,
    requires: tuple[str, str] | None = None,
) -> ctypes.CDLL | None:
    """``source_path`` built (``build_library``) and loaded, or None, logged with what is used
    ``instead``, where it cannot be built or loaded. ``requires``: ``(C function, CPU feature)``;
    the library is None too when that function (no arguments) returns 0 on this CPU."""
    try:
        library = ctypes.CDLL(str(build_library(source_path, flags)))
    except (OSError, subprocess.SubprocessError) as e:
        logger.warning("%s unavailable (%s); %s", source_path.name, e, instead)
        return None
    if requires is not None and not getattr(library, requires[0])():
        logger.info("CPU without %s: %s not used; %s", requires[1], source_path.name, instead)
        return None
    return library


def _cpu_id() -> bytes:
    """-march=native code is only valid on the CPU it was built for."""
    try:
        flags = next(
            line
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        flags = ""
    return (platform.machine() + platform.processor() + flags).encode()
