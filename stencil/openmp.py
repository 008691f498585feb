"""OpenMP's wait policy for this process, set before torch loads libgomp (imported first by
``stencil/__init__.py``)."""

import os
import sys


def set_wait_policy() -> None:
    """OpenMP team threads sleep as soon as a parallel region ends instead of spinning for the next
    one, in this process only. libgomp reads ``OMP_WAIT_POLICY`` once, when torch loads it: so only
    when stencil is imported before torch, and the variable is taken out of the environment again
    so that processes started from here (peers in benchmarks) get the user's own. An explicit
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is kept. On a busy machine a spinning thread burns the
    CPU time its partner's region is waiting for (docs/engine.md § Threads)."""
    if "torch" in sys.modules or {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & os.environ.keys():
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import torch  # noqa: F401  (libgomp initialises here)
    finally:
        del os.environ["OMP_WAIT_POLICY"]


set_wait_policy()
