"""The worker's memory budget: a cap on its address space (Linux ``RLIMIT_AS``)."""

from __future__ import annotations

import ctypes
import os
import resource


def address_space_bytes() -> int:
    """This process's current virtual size (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def limit_address_space(extra_bytes: int) -> int:
    """Allow ``extra_bytes`` of address space beyond what is mapped now; returns the idle size.
    An allocation past it fails (``MemoryError`` in Python, an abort in native code)."""
    _trim_heap()
    idle = address_space_bytes()
    if idle:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = idle + extra_bytes
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return idle


def _trim_heap() -> None:
    """Return the free top of the C heap (left by start-up work) so the idle size is tight."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
