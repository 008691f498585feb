"""Memory of a long test process that builds and drops many engines (the suite's
``tests/conftest.py`` calls ``release_memory`` after each module and after a test that grew it)."""

from __future__ import annotations

import ctypes
import gc
import sys


def resident_mib() -> int:
    """The process's resident memory (0 where there is no /proc)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) >> 10 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def release_memory() -> None:
    """Free what finished tests dropped. FastAPI keeps every endpoint it served in module-level
    caches (4096 entries), and through the routes' closures each app's engine: cleared first.
    An engine is a reference cycle, so it lasts until a full collection. glibc keeps the freed
    heap pages: ``malloc_trim`` hands them back (the test process grew past 10 GiB without)."""
    fastapi_models = sys.modules.get("fastapi.dependencies.models")
    for cached in vars(fastapi_models).values() if fastapi_models else ():
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only
    if trim is not None:
        trim(0)
