"""One CPU per OpenMP thread for the engine's kernels (``csrc/cpu_threads.c``), as vLLM's CPU
worker binds its threads.

``bind_threads(threads)`` pins the calling thread's OpenMP team (torch's pool, which the C
kernels share) to the first ``threads`` CPUs this thread may run on, only when those are exactly
``threads`` CPUs: an engine that uses every CPU it is allowed. With fewer threads than CPUs (say
two replicas of one thread each) it pins nothing, so replicas never pile onto the same CPUs.
"""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path

from stencil.kernels.cpu_attention import FLAGS
from stencil.paths import load_library

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).parent / "csrc" / "cpu_threads.c"


def bind_threads(threads: int) -> bool:
    """Pin ``threads`` OpenMP threads (the caller's team) one per allowed CPU; True when pinned."""
    allowed = sorted(os.sched_getaffinity(0))
    if threads < 2 or len(allowed) != threads:
        return False
    library = load_library(SOURCE, FLAGS, "threads are not pinned")
    if library is None:
        return False
    cpus = (ctypes.c_int * threads)(*allowed)
    failed = library.bind_threads(cpus, threads)
    if failed:
        logger.warning("%d of %d threads could not be pinned to CPUs %s", failed, threads, allowed)
    return not failed
