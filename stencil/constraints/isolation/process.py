"""``WorkerProcess``: the engine-side handle of one compile worker process."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from ..errors import (
    CompileCancelledError,
    CompileCrashError,
    CompileMemoryError,
    CompileTimeoutError,
    CompileWorkerError,
)
from ..limits import Limits
from ..spec import Constraint
from ..translation import Translation
from .protocol import Ready, Reply, WorkerInit

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
_POLL_S = 0.01  # how often a waiting compile checks its cancel event and the worker's memory
_START_POLL_S = 0.1  # how often a starting worker is checked for life
_MEMORY_MARKERS = ("memory allocation of", "MemoryError", "out of memory", "Cannot allocate")


logger = logging.getLogger(__name__)


class WorkerGoneError(CompileWorkerError):
    """The worker was found dead before it received the job (not the job's fault: retry)."""


class WorkerProcess:
    """One worker: launched on construction, ready after ``handshake``, driven by one owner
    thread at a time (which ``dispose``s it), killed by any thread."""

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self.ready: Ready | None = None
        self._stopped = threading.Event()
        self._stderr = tempfile.TemporaryFile()
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, str(BOOTSTRAP), str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                env=_worker_env(),
            )
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return not self._stopped.is_set() and self._proc.poll() is None

    def compile(
        self,
        constraint: Constraint,
        limits: Limits,
        timeout_s: float,
        cancel: threading.Event | None = None,
    ) -> tuple[Translation, int]:
        """The constraint's translation and its matcher's measured C-heap bytes (0: unknown);
        raises its ConstraintError, CompileTimeoutError (the worker is killed),
        CompileMemoryError / CompileCrashError (the worker died)."""
        if cancel is not None and cancel.is_set():  # cancelled while waiting for a worker
            raise CompileCancelledError("constraint compile cancelled (its request is gone)")
        rss_limit = _rss_bytes(self.pid) + self.memory_bytes
        try:
            self._conn.send((constraint, limits))
        except (OSError, ValueError):
            self.kill()
            raise WorkerGoneError("the compile worker had exited") from None
        self._wait(timeout_s, cancel, rss_limit)
        try:
            reply: Reply = self._conn.recv()
        except (EOFError, OSError):
            raise self._death_error() from None
        return self._result(reply)

    def kill(self) -> None:
        """SIGKILL and reap (idempotent, any thread); the owner still ``dispose``s."""
        self._stopped.set()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()

    def dispose(self) -> None:
        """Kill and release the socket and log file (owner only)."""
        self.kill()
        self._conn.close()
        self._stderr.close()

    def close(self, timeout_s: float = 1.0) -> None:
        """Ask an idle worker to exit; kill it if it does not within ``timeout_s`` (owner only)."""
        try:
            if self.alive:
                self._conn.send(None)
                self._proc.wait(timeout_s)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.dispose()

    def handshake(self, init: WorkerInit, slow_start_s: float) -> None:
        """Send the vocabulary and budget; wait until the worker is ready (it builds its
        tokenizer and warms up: 0.3-1 s idle, a minute and more for a 256k vocabulary on a
        loaded machine) for as long as it lives, logging a start slower than
        ``slow_start_s``. Raises CompileWorkerError with its exit status and stderr when it
        dies first (or the pool's close() killed it)."""
        start = time.monotonic()
        slow = False
        try:
            self._conn.send(init)
            while self.alive:
                if self._conn.poll(_START_POLL_S):
                    self.ready = self._conn.recv()
                    return
                if not slow and time.monotonic() - start >= slow_start_s:
                    slow = True
                    logger.warning(
                        "a constraint compile worker (pid %d) is still starting after %g s;"
                        " waiting while it runs",
                        self.pid,
                        slow_start_s,
                    )
        except (EOFError, OSError):
            pass
        raise self._start_error()

    # ---- internals ----------------------------------------------------------------------

    def _wait(self, timeout_s: float, cancel: threading.Event | None, rss_limit: int) -> None:
        """Until the reply is ready; kills the worker past the deadline, on cancel, or when
        its resident memory passes ``rss_limit`` (RLIMIT_AS in the worker is the hard cap;
        this check measures what a compile really touches, free heap reused included)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise CompileTimeoutError(timeout_s)
            if self._conn.poll(min(left, _POLL_S)):
                return
            if cancel is not None and cancel.is_set():
                self.kill()
                raise CompileCancelledError("constraint compile cancelled (its request is gone)")
            if _rss_bytes(self.pid) > rss_limit:
                self.kill()
                raise CompileMemoryError(self.memory_bytes)

    def _result(self, reply: Reply) -> tuple[Translation, int]:
        if reply.retire:
            self.kill()  # it exits anyway; the pool starts a spare
        if reply.status == "ok":
            return reply.translation, reply.heap_bytes
        if reply.status == "error":
            raise reply.error
        self.kill()  # memory: its heap is suspect; bug: start clean
        if reply.status == "memory":
            raise CompileMemoryError(self.memory_bytes)
        raise CompileWorkerError(f"constraint compile failed: {reply.detail}")

    def _death_error(self) -> Exception:
        if self._stopped.is_set():  # killed by close() from another thread
            return CompileWorkerError("the constraint compile pool was closed")
        code = self._proc.wait()
        tail = self._stderr_tail()
        self.kill()
        if any(marker in tail for marker in _MEMORY_MARKERS):
            return CompileMemoryError(self.memory_bytes)
        return CompileCrashError(f"the constraint compile crashed its worker ({_describe(code)})")

    def _start_error(self) -> CompileWorkerError:
        if self._stopped.is_set():
            return CompileWorkerError("a constraint compile worker did not start: stopped")
        try:  # its socket closed as it exited: reaped at once
            status = f"it exited ({_describe(self._proc.wait(1.0))})"
        except subprocess.TimeoutExpired:
            status = "its connection broke"
        tail = self._stderr_tail()[-500:]
        self.kill()
        return CompileWorkerError(
            f"a constraint compile worker did not start: {status}" + (f": {tail}" if tail else "")
        )

    def _stderr_tail(self, size: int = 4096) -> str:
        try:
            self._stderr.seek(max(0, self._stderr.seek(0, os.SEEK_END) - size))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""


def _worker_env() -> dict[str, str]:
    # One malloc arena: per-thread arenas reserve 64 MiB of address space each, which would
    # count against the RLIMIT_AS budget without being used.
    return {**os.environ, "MALLOC_ARENA_MAX": "1", "OMP_NUM_THREADS": "1"}


def _rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (0 where /proc is missing, or once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
