"""Session fixtures shared across test folders."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# engines, servers and Ray workers share the CI machine's 2 cores: OpenMP team threads that spin
# between parallel regions would burn the CPU the others need (docs/engine.md § Threads); set
# before anything loads torch, and inherited by every process the tests start
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from stencil.testing.live_server import LiveServer, serving
from stencil.testing.memory import release_memory, resident_mib
from stencil.testing.tiny_models import TEST_KV_BYTES

API_KEY = "sk-stencil-test"
LAST_LIVE_SERVER_USER = pytest.StashKey[str]()
STOP_LIVE_SERVER = pytest.StashKey[Callable[[], None]]()


CORPUS_ENV = "STENCIL_CORPUS_DIR"
RELEASE_AFTER_MIB = 128  # a test that grew the process this much built (and dropped) engines


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--corpus-dir",
        default=os.environ.get(CORPUS_ENV),
        help="the folder holding the corpora that cannot ship (jsonschemabench-dev/): runs the "
        f"tests marked `corpus` (default: ${CORPUS_ENV}; without either they are deselected)",
    )


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("corpus_dir")
    if given and not Path(given).is_dir():
        raise pytest.UsageError(f"--corpus-dir {given}: no such folder")


@pytest.fixture(scope="session")
def corpus_dir(pytestconfig: pytest.Config) -> Path:
    """The ``--corpus-dir`` folder (tests using it are marked ``corpus``: deselected without it)."""
    return Path(pytestconfig.getoption("corpus_dir"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported and collected (torch, transformers, the test tables: over a million
    objects) to the collector's permanent generation: the full collections below, and the
    automatic ones, then walk only what tests allocate (``freeze_heap`` does this in a server)."""
    import gc

    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a module (its models and KV caches freed), and after a test that grew the process
    (it built engines: the next test must not build its own on top of them), release memory;
    here, once pytest has dropped the test's arguments."""
    before = resident_mib()
    result = yield
    if (
        nextitem is None
        or nextitem.path != item.path
        or resident_mib() - before >= RELEASE_AFTER_MIB
    ):
        release_memory()
    return result


@pytest.fixture(scope="session")
def live_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """A real uvicorn server on 127.0.0.1 (a free port) around the embedded model, with the API
    key set and the playground mounted (as ``stencil serve`` does): the API tests (tests/api)
    and the playground's (tests/playground) share it. It stops after its last user, and its
    engine is freed (``pytest_runtest_teardown``): the tests after them build models of their
    own."""
    from stencil.engine.async_engine import AsyncLLMEngine
    from stencil.engine.config import EngineConfig

    config = EngineConfig(model=None, seed=0, kv_cache_memory=4 * TEST_KV_BYTES)
    engine = AsyncLLMEngine.from_config(config)
    with contextlib.ExitStack() as stack:
        live = stack.enter_context(serving(engine, API_KEY, playground=True))
        del engine

        def stop() -> None:
            stack.close()
            live.engine = None  # pytest keeps ``live`` until the session ends, not its engine
            release_memory()

        request.config.stash[STOP_LIVE_SERVER] = stop
        yield live


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--corpus-dir`` the corpus suite is deselected (the default run reads only the
    repository); the slow suite runs only when ``-m`` names it (``-m slow``). The live server's users first (whole modules, in their order): it stops after
    the last of them, before the tests that load models of their own."""
    apart = [] if config.getoption("corpus_dir") else ["corpus"]
    apart += [] if "slow" in (config.getoption("markexpr") or "") else ["slow"]
    left = [item for item in items if any(item.get_closest_marker(m) for m in apart)]
    if left:
        config.hook.pytest_deselected(items=left)
        gone = set(left)
        items[:] = [item for item in items if item not in gone]
    using = [item for item in items if "live_server" in getattr(item, "fixturenames", ())]
    users = {item.path for item in using}
    items.sort(key=lambda item: item.path not in users)  # stable: the last user stays last
    config.stash[LAST_LIVE_SERVER_USER] = using[-1].nodeid if using else ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    if nextitem is not None and item.nodeid == item.config.stash.get(LAST_LIVE_SERVER_USER, ""):
        item.config.stash.get(STOP_LIVE_SERVER, lambda: None)()


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A real local Ray cluster (2 CPUs, head on 127.0.0.1), shared by the Ray tests of the server
    (tests/api/ray) and of ``stencil extract --ray`` (tests/extract); shut down (and its
    processes reaped) at the end of the session."""
    from stencil.testing.ray_cluster import local_cluster

    with local_cluster(num_cpus=2) as address:
        yield address
