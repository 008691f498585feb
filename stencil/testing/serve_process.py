"""``stencil serve`` as a subprocess on 127.0.0.1 for the reliability tests and benchmarks: start
and wait for /health, read its RSS / file descriptors / threads / children, stop it with a signal.

    with start_serve("--max-waiting-requests", "8", api_key="k") as server:
        httpx.get(server.url("/v1/models"), headers=server.headers())
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

STARTUP_TIMEOUT = 300.0


@dataclass
class ServeProcess:
    proc: subprocess.Popen
    base_url: str
    api_key: str | None
    log_path: Path
    children_seen: set[int] = field(default_factory=set)

    def url(self, path: str) -> str:
        return self.base_url + path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def ps(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)

    def rss_bytes(self) -> int:
        return self.ps.memory_info().rss

    def num_fds(self) -> int:
        return self.ps.num_fds()

    def num_threads(self) -> int:
        return self.ps.num_threads()

    def children(self) -> list[int]:
        """Child pids now (also remembered, to check after exit that none survived)."""
        pids = [c.pid for c in self.ps.children(recursive=True)]
        self.children_seen.update(pids)
        return pids

    def surviving_children(self) -> list[int]:
        return [p for p in self.children_seen if _alive(p)]

    def metrics(self) -> dict[str, float]:
        """The ``stencil:*`` gauges and counters (first sample of each name)."""
        text = httpx.get(self.url("/metrics"), headers=self.headers(), timeout=30).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("stencil:") and "_bucket" not in line:
                name = line.split("{", 1)[0].split(" ", 1)[0][len("stencil:") :]
                out.setdefault(name, float(line.rsplit(" ", 1)[1]))
        return out

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.children()
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then SIGKILL to the whole group if it does not exit in ``timeout`` s."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        return self.proc.returncode

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        for pid in self.surviving_children():
            _kill(pid)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(
    *flags: str, api_key: str | None = None, log_level: str = "warning", env: dict | None = None
) -> ServeProcess:
    """Start ``stencil serve`` with ``flags`` on a free loopback port; wait until /health is 200."""
    port = free_port()
    cmd = [sys.executable, "-m", "stencil.cli", "--log-level", log_level, "serve"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), *flags]
    if api_key:
        cmd += ["--api-key", api_key]
    return start_process(cmd, port, api_key=api_key, env=env)


def start_process(
    cmd: list[str],
    port: int,
    api_key: str | None = None,
    env: dict | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> ServeProcess:
    """Start any server command that listens on ``port`` (``stencil serve``, a peer's server);
    wait until its /health is 200. Its output goes to a log file (tail shown on failure)."""
    log = Path(tempfile.mkstemp(prefix="stencil-serve-", suffix=".log")[1])
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    server = ServeProcess(proc, f"http://127.0.0.1:{port}", api_key, log)
    try:
        _wait_healthy(server, timeout)
    except BaseException:
        server.stop(10)
        raise
    return server


def _wait_healthy(server: ServeProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    name = " ".join(server.proc.args[:4])
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{name} exited during startup:\n{server.log()[-3000:]}")
        try:
            if httpx.get(server.url("/health"), timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{name} did not become healthy in time")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
