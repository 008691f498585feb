"""Reliability benchmark against a real ``stencil serve`` process on loopback:

1. the hostile corpus (``hostile_corpus.py``): status, latency p50/max per category, canary after
   each, 8 streaming canaries compared with a clean run, server RSS growth over the corpus;
2. overload: 256 concurrent requests against ``--max-waiting-requests 8``;
3. SIGTERM drain: in-flight requests finish, time to exit, exit status, children left.

    python -m bench.server.reliability_bench                      # all three
    python -m bench.server.reliability_bench --only corpus --compile-timeout 2
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import time
from collections import Counter

import httpx

from bench.common import table
from stencil.testing.hostile_corpus import build_corpus
from stencil.testing.hostile_runner import CorpusRun, canary_body, over_budget, run_corpus
from stencil.testing.serve_process import start_serve

KEY = "sk-reliability"
MIB = 1 << 20


def corpus_section(args: argparse.Namespace) -> bool:
    flags = ("--constraint-compile-timeout", str(args.compile_timeout))
    with start_serve(*flags, api_key=KEY) as server:
        models = httpx.get(server.url("/v1/models"), headers=server.headers()).json()
        max_len = models["data"][0]["max_model_len"]
        corpus = build_corpus(args.vocab_size, max_len)
        run = asyncio.run(
            run_corpus(server.base_url, server.headers(), corpus, rss=server.rss_bytes)
        )
    print(f"\n## Hostile corpus: {len(corpus)} payloads, {run.seconds:.1f} s\n")
    print(corpus_table(run, args.compile_timeout))
    problems = [f"- {o.payload.name}: {'; '.join(o.problems)}" for o in run.outcomes if o.problems]
    slow = [o for o in run.outcomes if over_budget(o, args.compile_timeout)]
    s = run.streaming
    print(f"\ncanary after each payload: {len(corpus) - len(run.canary_failures)}/{len(corpus)} ok")
    print(
        f"streaming canaries: {s.runs} runs, {len(s.mismatches)} differ from the clean run, "
        f"{len(s.errors)} errors"
    )
    print(f"server RSS growth over the corpus: {run.rss_growth / MIB:+.1f} MiB")
    for line in problems + [f"- slow: {o.payload.name} {o.latency * 1000:.0f} ms" for o in slow]:
        print(line)
    for line in s.mismatches + s.errors:
        print(f"- canary: {line[:300]}")
    ok = not problems and not slow and not run.canary_failures and not s.mismatches
    return ok and not s.errors and run.rss_growth <= 50 * MIB


def corpus_table(run: CorpusRun, compile_timeout: float) -> str:
    by_cat: dict[str, list] = {}
    for o in run.outcomes:
        by_cat.setdefault(o.payload.category, []).append(o)
    rows = []
    for cat, outs in by_cat.items():
        lat = [o.latency * 1000 for o in outs]
        statuses = Counter(o.status for o in outs)
        rows.append(
            [
                cat,
                len(outs),
                ", ".join(f"{k}x{v}" for k, v in sorted(statuses.items())),
                sum(1 for o in outs if o.status >= 500 or o.status == 0),
                statistics.median(lat),
                max(lat),
                sum(1 for o in outs if over_budget(o, compile_timeout)),
            ]
        )
    headers = ["category", "payloads", "statuses", "5xx", "p50 ms", "max ms", "over budget"]
    return table(headers, rows)


async def _flood(server, sent: int) -> Counter:
    limits = httpx.Limits(max_connections=sent, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def one(i: int) -> str:
            body = canary_body(f"the number {i}", i % 2 == 1, 2)
            r = await client.post(
                server.url("/v1/chat/completions"), json=body, headers=server.headers()
            )
            if r.status_code == 200:
                return "completed"
            ok = r.status_code in (429, 503) and r.headers.get("retry-after")
            return "rejected" if ok else f"other {r.status_code}"

        return Counter(await asyncio.gather(*(one(i) for i in range(sent))))


def overload_section(args: argparse.Namespace) -> bool:
    flags = ("--max-waiting-requests", "8", "--max-num-seqs", "8")
    with start_serve(*flags, api_key=KEY) as server:
        start = time.perf_counter()
        outcome = asyncio.run(_flood(server, 256))
        seconds = time.perf_counter() - start
    print("\n## Overload: 256 concurrent requests, queue 8, 8 running\n")
    rows = [
        [
            256,
            outcome["completed"],
            outcome["rejected"],
            256 - outcome["completed"] - outcome["rejected"],
            seconds,
        ]
    ]
    print(table(["sent", "completed", "rejected (503 + Retry-After)", "other", "seconds"], rows))
    return outcome["completed"] + outcome["rejected"] == 256


def drain_section(args: argparse.Namespace) -> bool:
    with start_serve("--shutdown-timeout", "60", api_key=KEY) as server:
        result = asyncio.run(_drain(server))
        result["children left"] = len(server.surviving_children())
    print("\n## SIGTERM drain: 8 streaming requests of 32 tokens in flight\n")
    print(table(list(result), [list(result.values())]))
    return result["exit status"] == 0 and result["completed"] == 8 and not result["children left"]


async def _drain(server) -> dict:
    async with httpx.AsyncClient(timeout=120) as client:

        async def one(i: int) -> bool:
            body = canary_body(f"the number {i}", True, 32)
            async with client.stream(
                "POST", server.url("/v1/chat/completions"), json=body, headers=server.headers()
            ) as r:
                text = (await r.aread()).decode()
            return (
                r.status_code == 200 and text.rstrip().endswith("[DONE]") and '"error"' not in text
            )

        tasks = [asyncio.create_task(one(i)) for i in range(8)]
        await asyncio.sleep(1.0)
        sent = time.perf_counter()
        server.signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        late = await client.post(
            server.url("/v1/chat/completions"),
            json=canary_body("x", False, 2),
            headers=server.headers(),
        )
        done = await asyncio.gather(*tasks)
        status = await asyncio.to_thread(server.wait, 120)
    return {
        "in flight": 8,
        "completed": sum(done),
        "new request during drain": late.status_code,
        "exit status": status,
        "seconds to exit": time.perf_counter() - sent,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["corpus", "overload", "drain"], default=None)
    parser.add_argument(
        "--compile-timeout",
        type=float,
        default=2.0,
        help="the server's --constraint-compile-timeout (seconds)",
    )
    parser.add_argument("--vocab-size", type=int, default=49152)
    args = parser.parse_args()
    sections = {"corpus": corpus_section, "overload": overload_section, "drain": drain_section}
    ok = True
    for name, section in sections.items():
        if args.only in (None, name):
            ok = section(args) and ok
    print("\nresult:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
