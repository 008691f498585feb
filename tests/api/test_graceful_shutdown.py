"""SIGTERM on a real ``stencil serve`` process: admission stops (503 + Retry-After, /health
``draining``), in-flight requests finish within ``--shutdown-timeout``, the process exits 0 with no
child left; with ``--shutdown-timeout 0`` in-flight requests end with an error (an error event on a
stream, a 503 body otherwise)."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest

from stencil.testing.serve_process import start_serve

KEY = "sk-drain"
MESSAGES = [{"role": "user", "content": "Count from one to one hundred in words."}]


def body(max_tokens: int, stream: bool) -> dict:
    return {
        "messages": MESSAGES,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


class InFlight(threading.Thread):
    """One chat request in a thread; records the status, SSE events or JSON body."""

    def __init__(self, server, max_tokens: int, stream: bool) -> None:
        super().__init__(daemon=True)
        self.server, self.payload, self.stream = server, body(max_tokens, stream), stream
        self.status: int | None = None
        self.events: list = []
        self.json: dict | None = None
        self.first_token = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(timeout=120) as client:
                url = self.server.url("/v1/chat/completions")
                headers = self.server.headers()
                with client.stream("POST", url, json=self.payload, headers=headers) as r:
                    self.status = r.status_code
                    if self.stream:
                        self._read_events(r)
                    else:
                        self.json = json.loads(r.read())
        except BaseException as e:  # surfaced by the test
            self.error = e
        finally:
            self.first_token.set()

    def _read_events(self, r: httpx.Response) -> None:
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                self.events.append(data if data == "[DONE]" else json.loads(data))
                if len(self.events) >= 2:
                    self.first_token.set()


def wait_running(server, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.metrics().get("num_requests_running", 0) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{n} requests never ran at once")


def start_in_flight(server, max_tokens: int) -> list[InFlight]:
    reqs = [InFlight(server, max_tokens, s) for s in (True, True, False)]
    for r in reqs:
        r.start()
    wait_running(server, len(reqs))
    for r in reqs[:2]:
        assert r.first_token.wait(60), "no first token"
    return reqs


def assert_clean_exit(server, within: float) -> None:
    assert server.wait(within) == 0, server.log()[-3000:]
    assert server.surviving_children() == []
    assert "Traceback" not in server.log(), server.log()[-3000:]


@pytest.fixture()
def draining_server():
    with start_serve("--shutdown-timeout", "60", "--max-num-seqs", "8", api_key=KEY) as server:
        yield server


def start_compile_workers(server) -> None:
    """The compile worker processes (2 by default) start with the server, before any constrained
    request; then a constrained request, so they have worked before the drain."""
    deadline = time.monotonic() + 30
    while len(server.children()) < 2:
        assert time.monotonic() < deadline, "the compile workers did not start with the server"
        time.sleep(0.1)
    payload = {**body(8, False), "guided_choice": ["yes", "no"]}
    r = httpx.post(
        server.url("/v1/chat/completions"), json=payload, headers=server.headers(), timeout=120
    )
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] in ("yes", "no")
    assert server.children(), "no compile worker process started"


IN_FLIGHT_TOKENS = 256  # still running 0.3 s after the signal (~6 ms a token on one request)


def test_sigterm_stops_admission_and_drains(draining_server):
    server = draining_server
    start_compile_workers(server)
    reqs = start_in_flight(server, max_tokens=IN_FLIGHT_TOKENS)
    server.signal(signal.SIGTERM)
    time.sleep(0.3)
    late = httpx.post(
        server.url("/v1/chat/completions"), json=body(4, False), headers=server.headers()
    )
    assert late.status_code == 503 and late.headers["retry-after"]
    assert late.json()["error"]["code"] == "server_shutting_down"
    health = httpx.get(server.url("/health"))
    assert health.status_code == 503 and health.json()["status"] == "draining"
    for r in reqs:
        r.join(120)
        assert r.error is None and r.status == 200
    for r in reqs[:2]:
        finishes = [e for e in r.events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
        assert r.events[-1] == "[DONE]" and finishes[-1]["choices"][0]["finish_reason"] == "length"
    assert reqs[2].json["choices"][0]["finish_reason"] == "length"
    assert reqs[2].json["usage"]["completion_tokens"] == IN_FLIGHT_TOKENS
    assert_clean_exit(server, within=60)


@pytest.fixture()
def impatient_server():
    with start_serve("--shutdown-timeout", "0", "--max-num-seqs", "8", api_key=KEY) as server:
        yield server


def test_shutdown_timeout_zero_ends_in_flight_requests_with_an_error(impatient_server):
    server = impatient_server
    start_compile_workers(server)
    reqs = start_in_flight(server, max_tokens=4000)
    sent = time.monotonic()
    server.signal(signal.SIGTERM)
    for r in reqs:
        r.join(60)
        assert r.error is None, r.error
    for r in reqs[:2]:
        assert r.status == 200 and r.events[-1] == "[DONE]"
        assert r.events[-2]["error"]["code"] == "server_shutting_down"
    assert reqs[2].status == 503
    assert reqs[2].json["error"]["code"] == "server_shutting_down"
    assert_clean_exit(server, within=30)
    assert time.monotonic() - sent < 30
