"""Where Stencil keeps what it builds once: converted models, downloads, compiled CPU kernels."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$STENCIL_CACHE_DIR``, default ``~/.cache/stencil``."""
    return Path(os.environ.get("STENCIL_CACHE_DIR") or Path.home() / ".cache" / "stencil")
