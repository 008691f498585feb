"""Running the hostile corpus against a server: each payload, then a canary request that must
succeed; meanwhile streaming canaries whose greedy output must equal a clean run's.

Used by ``tests/api/test_hostile_corpus.py`` (asserts) and ``bench/server/reliability_bench.py`` (table).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from stencil.api.sanitize import is_sanitized
from stencil.testing.hostile_payload import Payload

CANARY_TOPICS = (
    "the sea",
    "mountains",
    "coffee",
    "trains",
    "winter",
    "libraries",
    "bees",
    "rivers",
)
CANARY_TOKENS = 24


@dataclass
class Outcome:
    payload: Payload
    status: int
    latency: float
    message: str
    problems: list[str] = field(default_factory=list)


async def send(client: httpx.AsyncClient, base: str, auth: dict[str, str], p: Payload) -> Outcome:
    headers = {"Content-Type": "application/json", **auth, **p.headers}
    start = time.perf_counter()
    try:
        r = await client.request(p.method, base + p.path, content=p.body, headers=headers)
        status, raw = r.status_code, r.content
    except httpx.HTTPError as e:  # the server closed on us: a failure like a 5xx
        return Outcome(
            p, 0, time.perf_counter() - start, "", [f"transport error {type(e).__name__}"]
        )
    latency = time.perf_counter() - start
    return _judge(p, status, latency, raw)


def _judge(p: Payload, status: int, latency: float, raw: bytes) -> Outcome:
    problems: list[str] = []
    message = ""
    if status not in p.expect:
        problems.append(f"status {status}, expected one of {sorted(p.expect)}")
    if status >= 400:
        try:
            err = json.loads(raw)["error"]
            message = err["message"]
        except (ValueError, KeyError, TypeError):
            problems.append("the error body is not OpenAI-shaped")
        else:
            if set(err) != {"message", "type", "param", "code"}:
                problems.append(f"error keys {sorted(err)}")
            if not message or not is_sanitized(message):
                problems.append(f"unsanitized message {message[:120]!r}")
            if p.echo and p.echo in raw.decode("utf-8", "replace"):
                problems.append("the error echoes the user input whole")
    return Outcome(p, status, latency, message, problems)


def over_budget(
    o: Outcome, compile_timeout: float, plain: float = 0.25, compile_slack: float = 0.5
) -> bool:
    """A refusal later than ``plain`` seconds (compile budget + ``compile_slack`` for
    compile-bound payloads); a 200 (a pathological constraint that compiled) is a generation,
    not a refusal."""
    if 0 < o.status < 400:
        return False
    limit = compile_timeout + compile_slack if o.payload.compile_bound else plain
    return o.latency > limit


def canary_body(topic: str, stream: bool, max_tokens: int = CANARY_TOKENS) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": f"Write two sentences about {topic}."}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


async def canary(client: httpx.AsyncClient, base: str, auth: dict[str, str]) -> bool:
    """A small request right after a hostile one: it must succeed."""
    r = await client.post(
        base + "/v1/chat/completions", json=canary_body("cats", False, 1), headers=auth
    )
    return r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "length"


async def stream_text(
    client: httpx.AsyncClient, base: str, auth: dict[str, str], topic: str
) -> str:
    """The streamed text of one canary (raises on a non-200 or a stream without [DONE])."""
    parts, done = [], False
    url = base + "/v1/chat/completions"
    async with client.stream("POST", url, json=canary_body(topic, True), headers=auth) as r:
        if r.status_code != 200:
            raise RuntimeError(f"streaming canary got {r.status_code}")
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            event = json.loads(line[len("data: ") :])
            if "error" in event:
                raise RuntimeError(f"streaming canary error: {event['error']}")
            parts += [c["delta"].get("content") or "" for c in event["choices"]]
    if not done:
        raise RuntimeError("streaming canary ended without [DONE]")
    return "".join(parts)


@dataclass
class StreamingCanaries:
    """``len(CANARY_TOPICS)`` clients streaming their canary in a loop until stopped, each run
    compared with the clean reference."""

    reference: dict[str, str]
    pause: float = 0.0  # seconds between two runs of one client (lighter load)
    max_rounds: int = 1000
    runs: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    async def run(
        self, client: httpx.AsyncClient, base: str, auth: dict[str, str], stop: asyncio.Event
    ) -> None:
        await asyncio.gather(*(self._loop(client, base, auth, t, stop) for t in self.reference))

    async def _loop(self, client, base, auth, topic: str, stop: asyncio.Event) -> None:
        for _ in range(self.max_rounds):
            try:
                text = await stream_text(client, base, auth, topic)
            except (RuntimeError, httpx.HTTPError) as e:
                self.errors.append(f"{topic}: {e}")
                return
            self.runs += 1
            if text != self.reference[topic]:
                self.mismatches.append(f"{topic}: {text!r} != {self.reference[topic]!r}")
            if stop.is_set():
                return
            if self.pause:
                try:
                    await asyncio.wait_for(stop.wait(), self.pause)
                except TimeoutError:
                    pass


async def clean_reference(
    client: httpx.AsyncClient, base: str, auth: dict[str, str]
) -> dict[str, str]:
    texts = await asyncio.gather(*(stream_text(client, base, auth, t) for t in CANARY_TOPICS))
    return dict(zip(CANARY_TOPICS, texts, strict=True))


@dataclass
class CorpusRun:
    outcomes: list[Outcome]
    canary_failures: list[str]
    streaming: StreamingCanaries
    seconds: float
    rss_growth: int = 0  # bytes, from the first payload to the last (``rss`` given)


async def run_corpus(
    base: str,
    auth: dict[str, str],
    corpus: list[Payload],
    pause: float = 0.0,
    rss: Callable[[], int] | None = None,
) -> CorpusRun:
    """Every payload then a canary, with the streaming canaries running meanwhile (each
    client waiting ``pause`` seconds between its runs). ``rss()`` (the server's RSS) is read
    once the clean reference has run, before the first payload, and after the last."""
    # idle connections expire before the server's keep-alive timeout (5 s): never reuse one the
    # server is closing at that moment
    limits = httpx.Limits(max_connections=32, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        streaming = StreamingCanaries(await clean_reference(client, base, auth), pause)
        stop = asyncio.Event()
        background = asyncio.create_task(streaming.run(client, base, auth, stop))
        start, rss_before = time.perf_counter(), rss() if rss else 0
        outcomes, failures = [], []
        for p in corpus:
            outcomes.append(await send(client, base, auth, p))
            if not await canary(client, base, auth):
                failures.append(p.name)
        seconds = time.perf_counter() - start
        growth = rss() - rss_before if rss else 0
        stop.set()
        await background
    return CorpusRun(outcomes, failures, streaming, seconds, growth)
