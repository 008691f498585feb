"""``CompileWorkerPool``: a few compile worker processes, started lazily, replaced when killed."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ..errors import CompileWorkerError
from ..limits import Limits
from ..spec import Constraint
from ..translation import Translation
from ..vocab import TokenVocab
from .process import WorkerGoneError, WorkerProcess
from .protocol import WorkerInit


class CompileWorkerPool:
    """At most ``size`` compiles at once, each in its own worker process under a wall-time
    budget (the worker is SIGKILLed past it) and an address-space budget of ``memory_bytes``
    beyond the worker's idle footprint. Workers start on first use (one at once, the others
    in the background); a killed one is replaced in the background at once, so the next
    compile does not wait for a start. A starting worker is waited for while it lives (a
    256k vocabulary on a loaded machine takes minutes), one that dies first is an error with
    its exit status and stderr. Thread-safe;
    ``close()`` kills every worker (busy and starting ones included): no child is left."""

    def __init__(
        self,
        vocab: TokenVocab,
        *,
        size: int = 2,
        memory_bytes: int = 1 << 30,
        slow_start_s: float = 60.0,
    ) -> None:
        if size < 1 or memory_bytes < 1:
            raise ValueError("a compile pool needs size >= 1 and memory_bytes >= 1")
        if not vocab.tokenizer_json:
            raise ValueError("the vocabulary has no tokenizer_json to rebuild it in a worker")
        self._init = WorkerInit(
            vocab.tokenizer_json,
            vocab.vocab_size,
            vocab.tokenizer_size,
            vocab.eos_token_ids,
            memory_bytes,
        )
        self.size = size
        self.slow_start_s = slow_start_s
        """A worker still starting after this is logged; the pool waits while it lives."""
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()
        """Workers owned by a thread: compiling, or starting (before their handshake)."""
        self._starting: set[threading.Thread] = set()
        """Threads starting spare workers."""
        # Every worker is launched from this one long-lived thread: a worker dies with the
        # thread that launched it (Linux PR_SET_PDEATHSIG), so never from a passing thread.
        self._launcher = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="stencil-compile-launch"
        )
        self._closed = False
        self.workers_started = 0
        self.workers_stopped = 0
        """Workers killed or dead while the pool was open (timeouts, memory, crashes)."""

    @property
    def memory_bytes(self) -> int:
        return self._init.memory_bytes

    @property
    def idle_workers(self) -> int:
        """Started workers waiting for a job."""
        with self._lock:
            return len(self._idle)

    def pids(self) -> list[int]:
        """Process ids of the live workers (idle, busy or starting)."""
        with self._lock:
            return [w.pid for w in (*self._idle, *self._busy) if w.alive]

    def compile(
        self,
        constraint: Constraint,
        limits: Limits,
        timeout_s: float,
        cancel: threading.Event | None = None,
    ) -> tuple[Translation, int, int]:
        """Translate and validate ``constraint`` in a worker: its translation, its matcher's
        C-heap bytes (see ``WorkerProcess.compile``) and the worker's pid. The wall-time budget
        starts when a started worker receives the job."""
        with self._slots:
            for attempt in range(2):
                worker = self._checkout()
                try:
                    translation, heap = worker.compile(constraint, limits, timeout_s, cancel)
                    return translation, heap, worker.pid
                except WorkerGoneError:
                    if attempt:
                        raise
                finally:
                    self._checkin(worker)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop every worker (idle ones politely, busy and starting ones by SIGKILL); their
        owner threads see the death and dispose them. Idempotent."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()
            idle, self._idle = self._idle, []
            busy, starting = list(self._busy), list(self._starting)
        for worker in busy:
            worker.kill()
        for worker in idle:
            worker.close()
        for thread in starting:  # a spare launched before close() is disposed by its thread
            thread.join(timeout=5.0)
        self._launcher.shutdown(wait=False)

    def start(self) -> None:
        """Start, in the background, the workers that bring the pool to ``size`` (a server
        calls it at start-up, so that its first compile does not wait for a worker)."""
        with self._lock:
            missing = self.size - len(self._idle) - len(self._busy) - len(self._starting)
            if self._closed or missing <= 0:
                return
            threads = [
                threading.Thread(
                    target=self._start_spare, daemon=True, name="stencil-compile-spare"
                )
                for _ in range(missing)
            ]
            self._starting.update(threads)
        for thread in threads:
            thread.start()

    # ---- internals ----------------------------------------------------------------------
    def _checkout(self) -> WorkerProcess:
        with self._lock:
            while True:
                self._check_open()
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive:
                        self._busy.add(worker)
                        return worker
                    worker.dispose()
                if not self._starting:
                    break
                self._changed.wait()  # a spare is starting: sooner than a new launch
        worker = self._launch()
        self.start()  # first use: the rest of the pool starts in the background
        try:
            worker.handshake(self._init, self.slow_start_s)
        except CompileWorkerError:
            self._checkin(worker)
            raise
        return worker

    def _launch(self) -> WorkerProcess:
        """A new process, registered as busy before its (slow) handshake so close() reaches it."""
        try:
            worker = self._launcher.submit(WorkerProcess, self._init.memory_bytes).result()
        except RuntimeError:  # the launcher was shut down: closed
            self._check_open()
            raise
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
            room = len(self._idle) + len(self._busy) < self.size
            keep = worker.alive and worker.ready is not None and not self._closed and room
            if keep:
                self._idle.append(worker)
                self._changed.notify()
            stopped = not worker.alive and worker.ready is not None and not self._closed
            self.workers_stopped += stopped
        if not keep:
            worker.dispose()
        if stopped:
            self.start()  # replace it now, so the next compile does not wait

    def _start_spare(self) -> None:
        try:
            worker = self._launch()
            try:
                worker.handshake(self._init, self.slow_start_s)
            except CompileWorkerError:
                pass  # not retried here: the next compile starts a worker itself
            self._checkin(worker)
        except CompileWorkerError:
            pass  # closed meanwhile
        finally:
            with self._lock:
                self._starting.discard(threading.current_thread())
                self._changed.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise CompileWorkerError("the constraint compile pool is closed")
