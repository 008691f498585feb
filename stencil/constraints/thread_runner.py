"""``ThreadRunner``: run a call in a reusable daemon thread and wait for it at most a timeout.

A compile in a thread of its own (``ConstraintCompiler(workers=0)``) used to start a new thread
per compile; ``Thread.start`` waits until the new thread runs, so each compile paid one more
wake-up of the caller than a reused thread needs (~60 µs idle, ~0.5 ms on a loaded 2-core
machine). A call past its timeout keeps its thread busy to its end; the next call then gets
another thread, so a runaway compile never delays the ones after it. A thread idle for
``IDLE_S`` stops (a compiler that is never closed leaves no thread behind for long).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
IDLE_S = 10.0


class CallTimeout(Exception):
    """The call did not return within its timeout (it runs on in its thread)."""


class _Job(Generic[T]):
    __slots__ = ("fn", "done", "result", "error")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None


class ThreadRunner:
    """Thread-safe. Idle threads wait for work until ``close()``."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Job | None]] = []
        self._closed = False

    def run(self, fn: Callable[[], T], timeout_s: float) -> T:
        """``fn()``'s result, or its exception re-raised here; ``CallTimeout`` when it has
        not returned within ``timeout_s`` (it runs on to its end in its thread)."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name=self._name, daemon=True
            ).start()
        job = _Job(fn)
        inbox.put(job)
        if not job.done.wait(timeout_s):
            raise CallTimeout
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the idle threads; a busy one stops after its call. Idempotent; a later
        ``run`` still works (in a thread that stops after its call)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)

    def _serve(self, inbox: queue.SimpleQueue[_Job | None]) -> None:
        while (job := self._next(inbox)) is not None:
            try:
                job.result = job.fn()
            except BaseException as exc:  # handed to the caller's thread
                job.error = exc
            with self._lock:
                keep = not self._closed
                if keep:  # idle again before the caller wakes: its next call reuses us
                    self._idle.append(inbox)
            job.done.set()
            if not keep:
                return

    def _next(self, inbox: queue.SimpleQueue[_Job | None]) -> _Job | None:
        """The next job, or None to stop (closed, or idle for ``IDLE_S`` and still listed as
        idle: a caller that took this thread off the list is about to hand it a job)."""
        while True:
            try:
                return inbox.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return None
