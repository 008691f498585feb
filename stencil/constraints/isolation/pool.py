"""``CompileWorkerPool``: a few compile worker processes, started lazily, replaced when killed."""

from __future__ import annotations

import threading

from ..errors import CompileWorkerError
from ..limits import Limits
from ..spec import Constraint
from ..vocab import TokenVocab
from .process import WorkerGoneError, WorkerProcess
from .protocol import WorkerInit


class CompileWorkerPool:
    """At most ``size`` compiles at once, each in its own worker process under a wall-time
    budget (the worker is SIGKILLed past it) and an address-space budget of ``memory_bytes``
    beyond the worker's idle footprint. Thread-safe; ``close()`` kills every worker, busy
    ones included, and leaves no child process behind."""

    def __init__(
        self, vocab: TokenVocab, *, size: int = 2, memory_bytes: int = 1 << 30,
        startup_timeout_s: float = 60.0,
    ) -> None:
        if size < 1 or memory_bytes < 1:
            raise ValueError("a compile pool needs size >= 1 and memory_bytes >= 1")
        self._init = WorkerInit(
            vocab.tokenizer_json, vocab.vocab_size, vocab.tokenizer_size,
            vocab.eos_token_ids, memory_bytes,
        )
        if not vocab.tokenizer_json:
            raise ValueError("the vocabulary has no tokenizer_json to rebuild it in a worker")
        self.startup_timeout_s = startup_timeout_s
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()
        self._closed = False
        self.workers_started = 0
        self.workers_stopped = 0
        """Workers killed or dead while the pool was open (timeouts, memory, crashes)."""

    @property
    def memory_bytes(self) -> int:
        return self._init.memory_bytes

    def pids(self) -> list[int]:
        """Process ids of the live workers (idle or busy)."""
        with self._lock:
            return [w.pid for w in (*self._idle, *self._busy) if w.alive]

    def compile(
        self, constraint: Constraint, limits: Limits, timeout_s: float,
        cancel: threading.Event | None = None,
    ) -> Constraint:
        """Translate and validate ``constraint`` in a worker; see ``WorkerProcess.compile``.
        The wall-time budget starts when a started worker receives the job."""
        with self._slots:
            for attempt in range(2):
                worker = self._checkout()
                try:
                    return worker.compile(constraint, limits, timeout_s, cancel)
                except WorkerGoneError:
                    if attempt:
                        raise
                finally:
                    self._checkin(worker)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop every worker (idle ones politely, busy ones by SIGKILL). Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for worker in busy:
            worker.kill()  # its owner thread sees the death and disposes it
        for worker in idle:
            worker.close()

    # ---- internals ----------------------------------------------------------------------
    def _checkout(self) -> WorkerProcess:
        with self._lock:
            self._check_open()
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    self._busy.add(worker)
                    return worker
                worker.dispose()
        worker = WorkerProcess(self._init, self.startup_timeout_s)
        with self._lock:
            self.workers_started += 1
            if self._closed:
                worker.dispose()
                self._check_open()
            self._busy.add(worker)
        return worker

    def _checkin(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._busy.discard(worker)
            keep = worker.alive and not self._closed
            if keep:
                self._idle.append(worker)
            elif not self._closed:
                self.workers_stopped += 1
        if not keep:
            worker.dispose()

    def _check_open(self) -> None:
        if self._closed:
            raise CompileWorkerError("the constraint compile pool is closed")
