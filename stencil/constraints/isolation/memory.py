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


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_in_use() -> int | None:
    """Bytes allocated from the C heap now (glibc ``mallinfo2``: in-use chunks plus mmapped
    blocks), None elsewhere. llguidance allocates through it, so the difference around a
    build is the size of what was built (in a single-threaded worker)."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd


def _trim_heap() -> None:
    """Return the free top of the C heap (left by start-up work) so the idle size is tight."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
