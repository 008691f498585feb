"""``stencil serve --replicas 2 --ray ADDRESS`` on a real local Ray cluster (Ray Serve), a tiny
random-weight model, one thread per replica: one endpoint, health and metrics of each replica,
requests spread over both, one prefix kept on one replica, SSE streamed through; then one replica
SIGKILLed: the requests in flight on it end with a clean error, none hangs, the other serves on."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from stencil.testing.serve_process import ServeProcess, start_serve

KEY = "sk-ray-serve-test"
TIMEOUT = httpx.Timeout(120.0)


@pytest.fixture(scope="module")
def server(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    model = _tiny_model(tmp_path_factory.mktemp("tiny-ray"))
    flags = ("--replicas", "2", "--ray", ray_address, "--model", str(model),
             "--num-threads", "1", "--max-model-len", "2048", "--num-kv-blocks", "160",
             "--constraint-compile-workers", "1")  # fmt: skip
    try:
        with start_serve(*flags, api_key=KEY) as server:
            yield server
    finally:  # Serve's controller and proxy outlive `stencil serve --ray ADDRESS` (and its
        # failed start): the cluster's next user (tests/extract) gets it without them
        from ray import serve

        serve.shutdown()


def _tiny_model(out: Path) -> Path:
    """The suite's tiny Llama (SmolLM2's tokenizer), with room for long generations."""
    import stencil
    from stencil.testing.tiny_models import ARCH_BUILDERS, build_tiny_model

    config = ARCH_BUILDERS["llama-tied"]()
    config.max_position_embeddings = 2048
    return build_tiny_model("llama-tied", out, Path(stencil.default_model_path()), config)


def _chat(server: ServeProcess, prompt: str, **extra: Any) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 4, **extra}
    return httpx.post(server.url("/v1/chat/completions"), json=body, headers=server.headers(),
                      timeout=TIMEOUT)  # fmt: skip


def _health(server: ServeProcess) -> dict[str, Any]:
    return httpx.get(server.url("/health"), timeout=TIMEOUT).json()


def _health_of(server: ServeProcess, replicas: int) -> dict[str, Any]:
    """/health once the ingress knows ``replicas`` replicas (it learns them from Serve soon
    after the application is up)."""
    deadline = time.monotonic() + 60
    while (health := _health(server))["status"] != "ok" or len(health["replicas"]) < replicas:
        assert time.monotonic() < deadline, health
        time.sleep(0.2)
    return health


def test_two_replicas_one_endpoint_then_one_killed(server: ServeProcess) -> None:
    health = _health_of(server, replicas=2)
    assert all(r["status"] == "ok" for r in health["replicas"]), health
    pids = {r["replica"]: r["pid"] for r in health["replicas"]}

    # distinct prompts spread over both replicas; one prompt always lands on the same one
    seen = {_replica(_chat(server, f"question {i}: what is {i} + {i}?")) for i in range(12)}
    assert seen == set(pids)
    shared = "You extract invoices. " * 60  # longer than the routing prefix
    homes = {_replica(_chat(server, shared + f"document {i}")) for i in range(4)}
    assert len(homes) == 1

    # SSE streams through the ingress, chunk by chunk, ending with [DONE]
    events = _sse(server, "stream this", max_tokens=8)
    assert events[-1] == "[DONE]" and len(events) >= 3
    assert all("choices" in json.loads(e) for e in events[:-1])

    # /metrics: every replica's samples, labelled; the API key is required
    text = httpx.get(server.url("/metrics"), headers=server.headers(), timeout=TIMEOUT).text
    for replica in pids:
        assert f'stencil:prompt_tokens_total{{replica="{replica}"' in text, text[:2000]
    assert httpx.get(server.url("/metrics"), timeout=TIMEOUT).status_code == 401

    # kill the replica that holds a long stream and a non-streaming request
    victim = next(iter(homes))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        with httpx.stream("POST", server.url("/v1/chat/completions"), headers=server.headers(),
                          json=_long(shared, stream=True), timeout=TIMEOUT) as stream:  # fmt: skip
            assert stream.headers["x-stencil-replica"] == victim
            lines = stream.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert "choices" in first
            waiting = pool.submit(httpx.post, server.url("/v1/chat/completions"),
                                  json=_long(shared), headers=server.headers(), timeout=TIMEOUT)  # fmt: skip
            _wait_running(server, victim, 2)  # both requests are on the victim
            os.kill(pids[victim], signal.SIGKILL)
            rest = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
        failed = waiting.result(timeout=120)
    assert rest[-1] == "[DONE]"
    error = json.loads(rest[-2])["error"]
    assert error["code"] == "replica_unavailable" and error["type"] == "server_error", rest[-3:]
    assert failed.status_code == 503, failed.text
    assert failed.json()["error"]["code"] == "replica_unavailable"

    # the other replica keeps serving (Serve restarts the killed one meanwhile)
    answers = [_chat(server, f"after the kill {i}") for i in range(6)]
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    assert _health(server)["status"] == "ok"


def _wait_running(server: ServeProcess, replica: str, n: int) -> None:
    sample = f'stencil:num_requests_running{{replica="{replica}"'
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = httpx.get(server.url("/metrics"), headers=server.headers(), timeout=TIMEOUT).text
        values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith(sample)]  # fmt: skip
        if values and values[0] >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{n} requests never ran together on replica {replica}")


def _long(prompt: str, stream: bool = False) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "stream": stream,
            "max_tokens": 1500, "ignore_eos": True}  # fmt: skip


def _replica(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.headers["x-stencil-replica"]


def _sse(server: ServeProcess, prompt: str, **extra: Any) -> list[str]:
    body = {"messages": [{"role": "user", "content": prompt}], "stream": True, **extra}
    with httpx.stream("POST", server.url("/v1/chat/completions"), json=body,
                      headers=server.headers(), timeout=TIMEOUT) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
