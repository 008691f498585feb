"""``ThreadRunner``: results and exceptions cross threads, a call past its timeout raises on
time and leaves later calls unaffected, sequential calls reuse one thread, idle threads stop."""

from __future__ import annotations

import threading
import time

import pytest

from stencil.constraints import thread_runner
from stencil.constraints.thread_runner import CallTimeout, ThreadRunner


def _alive(name: str) -> int:
    return sum(t.name == name and t.is_alive() for t in threading.enumerate())


def test_results_and_exceptions_cross_threads():
    runner = ThreadRunner("t-results")
    assert runner.run(lambda: 41 + 1, 5.0) == 42
    with pytest.raises(ZeroDivisionError):
        runner.run(lambda: 1 / 0, 5.0)
    assert runner.run(threading.get_ident, 5.0) != threading.get_ident()
    runner.close()


def test_sequential_calls_reuse_one_thread():
    runner = ThreadRunner("t-reuse")
    idents = {runner.run(threading.get_ident, 5.0) for _ in range(50)}
    assert len(idents) == 1 and _alive("t-reuse") == 1
    runner.close()


def test_a_timed_out_call_runs_on_and_later_calls_are_not_delayed():
    runner = ThreadRunner("t-timeout")
    release, finished = threading.Event(), threading.Event()

    def stuck() -> None:
        release.wait(10)
        finished.set()

    start = time.perf_counter()
    with pytest.raises(CallTimeout):
        runner.run(stuck, 0.05)
    assert time.perf_counter() - start < 1.0
    start = time.perf_counter()
    assert runner.run(lambda: "next", 5.0) == "next"  # another thread: not behind `stuck`
    assert time.perf_counter() - start < 1.0 and not finished.is_set()
    release.set()
    assert finished.wait(5)
    runner.close()


def test_close_and_idle_timeout_stop_the_threads(monkeypatch):
    runner = ThreadRunner("t-close")
    runner.run(lambda: None, 5.0)
    runner.close()
    deadline = time.monotonic() + 5
    while _alive("t-close") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _alive("t-close") == 0
    assert runner.run(lambda: "after close", 5.0) == "after close"

    monkeypatch.setattr(thread_runner, "IDLE_S", 0.05)
    idle = ThreadRunner("t-idle")
    idle.run(lambda: None, 5.0)
    deadline = time.monotonic() + 5
    while _alive("t-idle") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _alive("t-idle") == 0
    assert idle.run(lambda: "again", 5.0) == "again"  # a fresh thread
    idle.close()
