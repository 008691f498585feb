"""Two source trees (an older checkout and this one) alternated on the engine, the server and
``stencil extract``, each run a fresh process importing only its tree's ``stencil`` (model load
outside the timing, each warmed on prompts outside the workload):

    python -m bench.trees_ab --tree /tmp/before --tree . --rounds 3 --threads 2

- engine: ``LLM.generate`` on ``--requests`` prompts at once (output tok/s), then one request at
  a time (``--single`` requests, single-stream tok/s); greedy, ``ignore_eos``.
- server: ``stencil serve`` on loopback, ``--clients`` concurrent clients, each sending
  ``--per-client`` chat completions without and then with a ``json_schema`` response format
  (output tok/s of each half, from the responses' ``usage``).
- extract: ``stencil extract`` over ``--docs`` payment documents (``extract_data``), docs/s.

The trees run A B A B (``bench.common.compare``); prints each measure's median per tree, the
ratio, every run, and the load range.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import httpx

from bench.common import MIN_ROUNDS, compare, median, results, summary, table
from bench.extract.extract_data import SCHEMA, make_documents
from bench.server.server_bench import PERSON  # the server bench's JSON workload
from stencil.testing.serve_process import free_port, start_process

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
    "matches in the old town hall and every student writes a short report about invoices"
).split()

ENGINE_CHILD = r"""
import json, sys, time
from stencil import LLM, SamplingParams

job = json.loads(sys.argv[1])
llm = LLM(num_threads=job["threads"])
params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True)

def tok_s(prompts):
    start = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs) / (time.perf_counter() - start)

llm.generate(job["warm"], params, use_tqdm=False)
batch = tok_s(job["prompts"])
single = [tok_s([p]) for p in job["single"]]
print(json.dumps({"engine tok/s": batch, "single stream tok/s": sorted(single)[len(single) // 2]}))
"""

EXTRACT_CHILD = r"""
import json, sys, tempfile, time
from stencil import LLM
from stencil.cli import build_parser
from stencil.extract.command import run

job = json.loads(sys.argv[1])
llm = LLM(num_threads=job["threads"])

def once(folder):  # a fresh --out: an existing one would be resumed
    out = tempfile.mkdtemp() + "/out.jsonl"
    argv = ["extract", "--schema", job["schema"], folder, "--out", out,
            "--max-tokens", str(job["max_tokens"])]
    start = time.perf_counter()
    run(build_parser().parse_args(argv), llm=llm)
    seconds = time.perf_counter() - start
    assert all(json.loads(x)["ok"] for x in open(out)), "a document failed"
    return seconds

once(job["warm"])
print(json.dumps({"extract docs/s": job["docs"] / once(job["work"])}))
"""


def prompts(n: int, seed: int) -> list[str]:
    """``n`` distinct prompts of 40-80 words; ``seed`` apart keeps warm-up and workload apart."""
    return [
        " ".join(WORDS[(seed * 7 + i * 3 + k * (i + 5)) % len(WORDS)] for k in range(40 + i % 41))
        for i in range(n)
    ]


def child(tree: Path, code: str, job: dict) -> dict[str, float]:
    cmd = [sys.executable, "-P", "-c", code, json.dumps(job)]
    done = subprocess.run(
        cmd, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: rc {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def engine(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    job = {
        "threads": args.threads,
        "max_tokens": args.max_tokens,
        "warm": prompts(4, seed=99),
        "prompts": prompts(args.requests, seed=0),
        "single": prompts(args.single, seed=1),
    }
    return child(tree, ENGINE_CHILD, job)


async def chat(http: httpx.AsyncClient, model: str, text: str, schema: dict | None, args) -> int:
    body: dict = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": args.max_tokens,
        "temperature": 0,
    }
    if schema:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema},
        }
    r = await http.post("/v1/chat/completions", json=body)
    r.raise_for_status()
    return r.json()["usage"]["completion_tokens"]


async def load(url: str, schema: dict | None, args, seed: int) -> float:
    """Output tok/s of ``--clients`` clients, each sending ``--per-client`` requests in turn."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        model = (await http.get("/v1/models")).json()["data"][0]["id"]

        async def client(c: int) -> int:
            texts = [
                f"Describe person {seed + c * 100 + i} in one line." for i in range(args.per_client)
            ]
            return sum([await chat(http, model, t, schema, args) for t in texts])

        start = time.perf_counter()
        tokens = sum(await asyncio.gather(*(client(c) for c in range(args.clients))))
        return tokens / (time.perf_counter() - start)


def server(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """A fresh ``stencil serve`` of ``tree`` (``-P``: its own ``stencil``, not the cwd's)."""
    port = free_port()
    cmd = [sys.executable, "-P", "-m", "stencil.cli", "--log-level", "warning", "serve"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--num-threads", str(args.threads)]
    with start_process(cmd, port, env={"PYTHONPATH": str(tree)}) as proc:
        warm = argparse.Namespace(**{**vars(args), "clients": 1, "per_client": 2})
        asyncio.run(load(proc.base_url, PERSON, warm, seed=9000))
        return {
            "server tok/s, plain": asyncio.run(load(proc.base_url, None, args, seed=0)),
            "server tok/s, json_schema": asyncio.run(load(proc.base_url, PERSON, args, seed=0)),
        }


def extract(tree: Path, folder: Path, args: argparse.Namespace) -> dict[str, float]:
    job = {
        "threads": args.threads,
        "max_tokens": args.max_tokens,
        "docs": args.docs,
        "schema": str(folder / "schema.json"),
        "warm": str(folder / "warm"),
        "work": str(folder / "work"),
    }
    return child(tree, EXTRACT_CHILD, job)


def write_documents(folder: Path, docs: int) -> None:
    """The payment documents of ``extract_data``: 8 to warm on (another seed), ``docs`` timed."""
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    for name, made in (("warm", make_documents(8, seed=99)), ("work", make_documents(docs))):
        (folder / name).mkdir()
        for i, doc in enumerate(made):
            (folder / name / f"doc{i:03d}.txt").write_text(doc.text)


def one_run(tree: Path, folder: Path, args: argparse.Namespace) -> dict[str, float]:
    """Every workload of ``--workloads`` once on ``tree``, each in a fresh process."""
    got: dict[str, float] = {}
    for name in args.workloads:
        if name == "engine":
            got |= engine(tree, args)
        elif name == "server":
            got |= server(tree, args)
        else:
            got |= extract(tree, folder, args)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="twice: A, then B")
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--workloads",
        nargs="+",
        default=["engine", "server", "extract"],
        choices=["engine", "server", "extract"],
    )
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--single", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--per-client", type=int, default=3)
    ap.add_argument("--docs", type=int, default=20)
    args = ap.parse_args()
    trees = [Path(t).resolve() for t in args.tree]
    with tempfile.TemporaryDirectory() as tmp:
        write_documents(Path(tmp), args.docs)
        runs = compare(
            {i: partial(one_run, t, Path(tmp), args) for i, t in enumerate(trees)}, args.rounds
        )
    got = {i: results(runs[i]) for i in runs}
    rows = []
    for measure in got[0][0]:
        a, b = ([r[measure] for r in got[i]] for i in (0, 1))
        rows.append(
            [
                measure,
                f"{median(a):.2f}",
                f"{median(b):.2f}",
                f"{median(b) / median(a):.3f}",
                ", ".join(f"{x:.2f}" for x in a),
                ", ".join(f"{x:.2f}" for x in b),
            ]
        )
    loads = ", ".join(f"{r.load:.1f}" for i in runs for r in runs[i])
    print(f"\nA = {trees[0]}, B = {trees[1]}, {args.threads} threads; {summary(runs, args.rounds)}")
    print(f"loads after each run (A runs, then B runs): {loads}\n")
    print(table(["measure", "A (median)", "B (median)", "B / A", "A runs", "B runs"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
