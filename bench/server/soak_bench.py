"""Soak: N concurrent clients against a real ``stencil serve`` for M minutes, mixed plain / JSON
schema / regex / choice requests, streaming and not. Reports zero 5xx, sent = completed + counted
rejections (nothing lost), every constrained output valid (``jsonschema`` / ``re``), server RSS
drift, file descriptors and threads before/after.

    python -m bench.server.soak_bench --minutes 10 --clients 32 --max-tokens 24
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import jsonschema

from bench.common import table
from stencil.testing.serve_process import ServeProcess, start_serve

KEY = "sk-soak"
MIB = 1 << 20
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
}
DATE = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
CHOICES = ["yes", "no", "maybe"]
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov"]
KINDS = ("plain", "json", "regex", "choice")


@dataclass
class Tally:
    sent: int = 0
    completed: int = 0
    rejected: int = 0
    server_errors: int = 0
    other: Counter = field(default_factory=Counter)
    constrained: int = 0
    valid: int = 0
    invalid: list[str] = field(default_factory=list)
    by_kind: Counter = field(default_factory=Counter)


def request_for(kind: str, rng: random.Random, max_tokens: int, stream: bool) -> dict:
    name = rng.choice(NAMES)
    prompts = {
        "plain": f"Tell me one fact about {name}.",
        "json": f"Extract the person: {name} was {rng.randint(20, 90)} years old.",
        "regex": f"When was {name} born? Answer with a date.",
        "choice": f"Was {name} a computer scientist?",
    }
    body: dict = {
        "messages": [{"role": "user", "content": prompts[kind]}],
        "max_tokens": max_tokens,
        "temperature": rng.choice([0.0, 0.7, 1.0]),
        "seed": rng.randint(0, 1 << 30),
        "stream": stream,
    }
    if kind == "json":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON},
        }
    elif kind == "regex":
        body["guided_regex"] = DATE
    elif kind == "choice":
        body["guided_choice"] = CHOICES
    return body


def valid(kind: str, text: str) -> bool:
    try:
        if kind == "json":
            jsonschema.validate(json.loads(text), PERSON)
            return True
        if kind == "regex":
            return re.fullmatch(DATE, text) is not None
        return text in CHOICES
    except (ValueError, jsonschema.ValidationError):
        return False


async def send(
    client: httpx.AsyncClient, server: ServeProcess, body: dict
) -> tuple[int, str, dict]:
    """(status, text, response headers); text is the joined stream or the message content."""
    url = server.url("/v1/chat/completions")
    async with client.stream("POST", url, json=body, headers=server.headers()) as r:
        raw = await r.aread()
    if r.status_code != 200:
        return r.status_code, raw.decode(errors="replace"), dict(r.headers)
    if not body["stream"]:
        return 200, json.loads(raw)["choices"][0]["message"]["content"] or "", dict(r.headers)
    text, done = [], False
    for line in raw.decode().splitlines():
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            event = json.loads(line[6:])
            if "error" in event:
                return 500, json.dumps(event), {}
            text += [c["delta"].get("content") or "" for c in event["choices"]]
    return (200 if done else 599), "".join(text), {}


async def client_loop(
    i: int, server: ServeProcess, deadline: float, max_tokens: int, tally: Tally
) -> None:
    rng = random.Random(i)
    limits = httpx.Limits(max_connections=2, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        while time.monotonic() < deadline:
            kind, stream = rng.choice(KINDS), rng.random() < 0.5
            tally.sent += 1
            tally.by_kind[kind] += 1
            try:
                status, text, headers = await send(
                    client, server, request_for(kind, rng, max_tokens, stream)
                )
            except httpx.HTTPError as e:
                tally.other[f"transport {type(e).__name__}"] += 1
                continue
            record(tally, kind, status, text, headers)
            if status in (429, 503):
                await asyncio.sleep(float(headers.get("retry-after", "1")))


def record(tally: Tally, kind: str, status: int, text: str, headers: dict) -> None:
    if status == 200:
        tally.completed += 1
        if kind != "plain":
            tally.constrained += 1
            if valid(kind, text):
                tally.valid += 1
            else:
                tally.invalid.append(f"{kind}: {text[:120]!r}")
    elif status in (429, 503) and headers.get("retry-after"):
        tally.rejected += 1
    elif status >= 500:
        tally.server_errors += 1
        tally.other[f"{status}: {text[:160]}"] += 1
    else:
        tally.other[f"{status}: {text[:160]}"] += 1


@dataclass
class Sample:
    rss: int
    fds: int
    threads: int


def sample(server: ServeProcess) -> Sample:
    return Sample(server.rss_bytes(), server.num_fds(), server.num_threads())


async def run_load(server: ServeProcess, seconds: float, clients: int, max_tokens: int) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + seconds
    await asyncio.gather(
        *(client_loop(i, server, deadline, max_tokens, tally) for i in range(clients))
    )
    return tally


async def settle(server: ServeProcess, seconds: float = 8.0) -> Sample:
    """The server's idle figures once the clients' connections have closed."""
    await asyncio.sleep(seconds)
    return sample(server)


def report(args, warm: Sample, end: Sample, peak: int, tally: Tally, seconds: float) -> bool:
    lost = tally.sent - tally.completed - tally.rejected - tally.server_errors
    drift = (end.rss - warm.rss) / warm.rss
    share = tally.valid / tally.constrained if tally.constrained else 1.0
    print(
        f"\n## Soak: {args.clients} clients, {seconds / 60:.1f} min, max_tokens {args.max_tokens}\n"
    )
    rows = [
        [
            tally.sent,
            tally.completed,
            tally.rejected,
            tally.server_errors,
            lost,
            f"{tally.valid}/{tally.constrained} ({share:.1%})",
            tally.completed / seconds,
        ]
    ]
    heads = [
        "sent",
        "completed",
        "rejected (Retry-After)",
        "5xx",
        "lost",
        "constrained valid",
        "req/s",
    ]
    print(table(heads, rows))
    print()
    rows = [
        ["RSS MiB", warm.rss / MIB, end.rss / MIB, f"{drift:+.1%} (peak {peak / MIB:.0f})"],
        ["open fds", warm.fds, end.fds, end.fds - warm.fds],
        ["threads", warm.threads, end.threads, end.threads - warm.threads],
    ]
    print(table(["server", "after warm-up", "after soak", "change"], rows))
    print(f"\nrequests by kind: {dict(tally.by_kind)}")
    for line in list(tally.other.items())[:10]:
        print(f"- other: {line}")
    for line in tally.invalid[:10]:
        print(f"- invalid: {line}")
    ok = tally.server_errors == 0 and lost == 0 and share == 1.0 and drift <= 0.10
    return ok and end.fds <= warm.fds + 2 and end.threads <= warm.threads + 2


async def soak(args) -> bool:
    flags = ("--max-num-seqs", str(args.clients), "--constraint-compile-timeout", "10")
    with start_serve(*flags, api_key=KEY) as server:
        await run_load(server, args.warmup_seconds, args.clients, args.max_tokens)
        warm = await settle(server)
        peak = warm.rss
        start = time.monotonic()
        load = asyncio.create_task(
            run_load(server, args.minutes * 60, args.clients, args.max_tokens)
        )
        while not load.done():
            await asyncio.wait({load}, timeout=10)
            peak = max(peak, server.rss_bytes())
        seconds = time.monotonic() - start
        end = await settle(server)
        return report(args, warm, end, peak, load.result(), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--warmup-seconds", type=float, default=30.0)
    args = parser.parse_args()
    ok = asyncio.run(soak(args))
    print("\nresult:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
