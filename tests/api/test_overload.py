"""Overload on a real ``stencil serve`` process: 256 concurrent requests against a queue of 8.
The excess gets 503/429 with Retry-After, every admitted request completes, and
sent = completed + rejected; afterwards nothing is left queued or running."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import httpx
import pytest

from stencil.testing.serve_process import start_serve

SENT = 256
QUEUE = 8
KEY = "sk-overload"


@pytest.fixture(scope="module")
def small_queue_server():
    flags = ("--max-waiting-requests", str(QUEUE), "--max-num-seqs", "8")
    with start_serve(*flags, api_key=KEY) as server:
        yield server


async def one(client: httpx.AsyncClient, server, i: int) -> tuple[str, int]:
    stream = i % 2 == 1
    payload = {
        "messages": [{"role": "user", "content": f"Say a word about the number {i}."}],
        "max_tokens": 2,
        "temperature": 0,
        "stream": stream,
    }
    url, headers = server.url("/v1/chat/completions"), server.headers()
    async with client.stream("POST", url, json=payload, headers=headers) as r:
        raw = await r.aread()
    if r.status_code in (429, 503):
        assert r.headers.get("retry-after", "").isdigit(), r.headers
        assert json.loads(raw)["error"]["code"] == "queue_full"
        return "rejected", r.status_code
    assert r.status_code == 200, raw[:300]
    text = raw.decode()
    if stream:
        assert text.rstrip().endswith("data: [DONE]") and '"finish_reason": "length"' in text
    else:
        assert json.loads(text)["choices"][0]["finish_reason"] in ("length", "stop")
    return "completed", 200


async def flood(server) -> list[tuple[str, int]]:
    limits = httpx.Limits(max_connections=SENT, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=180, limits=limits) as client:
        return await asyncio.gather(*(one(client, server, i) for i in range(SENT)))


def test_256_concurrent_requests_against_a_small_queue(small_queue_server):
    results = asyncio.run(flood(small_queue_server))
    outcome = Counter(kind for kind, _ in results)
    assert outcome["completed"] + outcome["rejected"] == SENT, outcome
    assert outcome["rejected"] > 0, "the queue never filled"
    assert outcome["completed"] >= QUEUE, outcome
    metrics = small_queue_server.metrics()
    assert metrics["num_requests_running"] == 0 and metrics["num_requests_waiting"] == 0
    assert httpx.get(small_queue_server.url("/health")).status_code == 200
