"""A real local Ray cluster for the tests (head on 127.0.0.1, no dashboard, no usage stats), and
a way to SIGKILL one of its worker processes by what it runs, as a lost node or the OOM killer
would. Everything started here is stopped on exit; leftover processes of ours are killed by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import psutil

# Serve's controller kills a proxy actor not ready within 5 s, and ``serve.start`` then fails
# (ActorDiedError: ProxyActor killed by ray.kill): a proxy's start on CI's 2 loaded cores takes
# longer. The cluster's processes inherit this environment.
CLUSTER_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
}


@contextlib.contextmanager
def local_cluster(num_cpus: int = 2) -> Iterator[str]:
    """Start a Ray head in this process (``ray.init``); yield its GCS address; shut it down."""
    import ray

    saved = {k: os.environ.get(k) for k in CLUSTER_ENV}
    os.environ.update(CLUSTER_ENV)
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        ctx = ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
        )
        yield ctx.address_info["gcs_address"]
    finally:
        _shutdown(ray)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reap(ours)


def _shutdown(ray) -> None:
    if "ray.serve" in sys.modules and ray.is_initialized():
        from ray import serve

        with contextlib.suppress(Exception):
            serve.shutdown()
    ray.shutdown()


def _reap(before: set[int], grace: float = 10.0) -> None:
    """Kill the processes this cluster left behind (children of ours that were not there before)."""
    deadline = time.monotonic() + grace
    while True:
        left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        left = [p for p in left if _alive(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for p in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def workers(title: str) -> list[psutil.Process]:
    """This process's descendants whose command line (Ray's process title) contains ``title``."""
    found = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if title in " ".join(p.cmdline()) and _alive(p):
                found.append(p)
    return found


class Killer(threading.Thread):
    """SIGKILLs the first process whose title contains ``title`` (e.g. an actor running a batch:
    ``'MapBatches(ExtractActor)).submit'``), once, ``delay`` seconds after it shows, until
    stopped (however long a loaded machine takes to start the actors). ``killed`` holds its pid
    afterwards."""

    def __init__(self, title: str, delay: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.title, self.delay = title, delay
        self.killed: int | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            found = workers(self.title)
            if found and not self._done.wait(self.delay):
                with contextlib.suppress(ProcessLookupError):  # gone: look for the next one
                    os.kill(found[0].pid, signal.SIGKILL)
                    self.killed = found[0].pid
                    return
            self._done.wait(0.1)

    def stop(self) -> None:
        self._done.set()
        self.join(5)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
