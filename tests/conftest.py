"""Session fixtures shared across test folders."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# engines, servers and Ray workers share the CI machine's 2 cores: OpenMP team threads that spin
# between parallel regions would burn the CPU the others need (docs/engine.md § Threads); set
# before anything loads torch, and inherited by every process the tests start
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from stencil.testing.live_server import LiveServer, serving
from stencil.testing.tiny_models import TEST_KV_BYTES

API_KEY = "sk-stencil-test"


@pytest.fixture(scope="module", autouse=True)
def _return_freed_memory() -> Iterator[None]:
    """After each module, hand the heap's free pages back to the OS: the models and KV caches a
    module loads are freed, but glibc keeps the pages, and the test process grew past 10 GiB."""
    yield
    import ctypes
    import gc

    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only
    if trim is not None:
        trim(0)


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    """A real uvicorn server on 127.0.0.1 (a free port) around the embedded model, with the API
    key set and the playground mounted (as ``stencil serve`` does): the API tests (tests/api)
    and the playground's (tests/playground) share it."""
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    config = EngineConfig(model=None, seed=0, kv_cache_memory=4 * TEST_KV_BYTES)
    engine = AsyncLLMEngine.from_config(config)
    with serving(engine, API_KEY, playground=True) as live:
        yield live


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A real local Ray cluster (2 CPUs, head on 127.0.0.1), shared by the Ray tests of the server
    (tests/api/ray) and of ``stencil extract --ray`` (tests/extract); shut down (and its
    processes reaped) at the end of the session."""
    from stencil.testing.ray_cluster import local_cluster

    with local_cluster(num_cpus=2) as address:
        yield address
