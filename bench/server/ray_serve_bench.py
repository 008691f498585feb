"""Replica scaling: the same streaming load (server_bench's workload: half the requests with a JSON
schema) against ``stencil serve`` alone and ``stencil serve --replicas N`` on a private local Ray
instance, one engine thread per replica.

    python -m bench.server.ray_serve_bench                          # plain, 1 and 2 replicas
    python -m bench.server.ray_serve_bench --replicas 1,2,4 --requests 32 --concurrency 8

Prints a Markdown table: requests, wall time, requests/s, output tokens/s, TTFT p50, and the
throughput relative to one replica. Replicas beyond the machine's cores only add contention.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from bench.common import median, table
from bench.server.server_bench import run_level, served_model
from stencil.testing.ray_cluster import QUIET_ENV
from stencil.testing.serve_process import start_serve


def measure(replicas: int | None, args) -> list:
    flags = ["--num-threads", "1", "--max-num-seqs", str(args.concurrency)]
    if replicas is not None:
        flags += ["--replicas", str(replicas)]
    if args.model:
        flags += ["--model", args.model]
    with start_serve(*flags, env=QUIET_ENV) as server:
        url = f"{server.base_url}/v1"
        model = served_model(url, None)
        asyncio.run(run_level(url, model, 2, _Args(args, rounds=1)))  # warm-up
        results, elapsed = asyncio.run(
            run_level(url, model, args.concurrency, _Args(args, args.requests // args.concurrency))
        )
    tokens = sum(r.tokens for r in results)
    name = "serve (no Ray)" if replicas is None else f"--replicas {replicas}"
    return [name, len(results), elapsed, len(results) / elapsed, tokens / elapsed,
            median([r.ttft for r in results])]  # fmt: skip


class _Args:
    def __init__(self, args, rounds: int) -> None:
        self.max_tokens, self.rounds, self.api_key = args.max_tokens, max(1, rounds), None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", default="1,2", help="comma-separated replica counts")
    p.add_argument("--no-plain", action="store_true", help="skip the run without Ray")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--model", default=None)
    args = p.parse_args(argv)
    counts: list[int | None] = [] if args.no_plain else [None]
    counts += [int(n) for n in args.replicas.split(",")]
    rows = []
    for n in counts:
        rows.append(measure(n, args))
        print(f"done: {rows[-1][0]}", file=sys.stderr, flush=True)
    base = next((r[3] for r in rows if r[0] == "--replicas 1"), rows[0][3])
    rows = [[*r, f"{r[3] / base:.2f}x"] for r in rows]
    headers = ["mode", "requests", "wall s", "req/s", "output tok/s", "TTFT p50 s", "vs 1 replica"]
    print(table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
