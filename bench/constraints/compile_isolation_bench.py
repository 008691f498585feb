"""Compile isolation: what running every constraint compile in a killable worker process costs,
and what it buys. Prints two markdown tables.

    python -m bench.constraints.compile_isolation_bench --per-category 50

Latency: a seeded JSONSchemaBench-dev sample (schemas that compile), Qwen2.5 vocabulary, no
cache; each schema is compiled in every mode in turn (interleaved, so machine load hits all
modes alike). "in-thread" = the compile (translation, llguidance build and first mask) in a
thread of this process (``workers=0``); "isolated" = the compile in a worker process, then the
matcher rebuilt here from the validated grammar.

Kill: a pathological schema (``oneOf`` of 3,000 closed objects each requiring a key of its
own, ~25 s of pairwise disjointness proofs) under a 1 s budget: time until the caller gets
``CompileTimeoutError``, and the CPU seconds spent on it in the next 2 s (by the stray thread
in-thread; by nothing once the worker is SIGKILLed). Memory: a 10,000-way choice under an
8 MiB worker budget.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

from bench.common import percentile, table
from bench.constraints.constraints_bench import CATEGORIES, DATA
from bench.constraints.engines import VOCAB_SIZE, qwen_tokenizer
from stencil.constraints import (
    CompileMemoryError,
    CompileTimeoutError,
    Constraint,
    ConstraintCompiler,
    ConstraintError,
    TokenVocab,
    translate,
)
from stencil.testing.pathological import pathological

MODES = ("in-thread", "isolated")


def sample_schemas(per_category: int, seed: int) -> list[dict]:
    out = []
    for category in CATEGORIES:
        rows = [json.loads(line)["schema"] for line in (DATA / f"{category}.jsonl").open()]
        random.Random(seed).shuffle(rows)
        out += rows[: per_category * 2]
    return out


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1e3


def measure_latency(
    vocab: TokenVocab, schemas: list[dict], per_category: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {m: [] for m in MODES}
    with (
        ConstraintCompiler(vocab, cache_bytes=0) as local,
        ConstraintCompiler(vocab, cache_bytes=0, workers=1) as isolated,
    ):
        isolated.compile(Constraint.regex("warm"))  # the worker's start is not a compile
        runs = {
            "in-thread": lambda s: local.compile(Constraint.json_schema(s)),
            "isolated": lambda s: isolated.compile(Constraint.json_schema(s)),
        }
        kept = 0
        for schema in schemas:
            try:
                translate(Constraint.json_schema(schema))
            except ConstraintError:
                continue
            for mode in MODES:
                times[mode].append(timed(runs[mode], schema))
            kept += 1
            if kept == per_category * len(CATEGORIES):
                break
    return times


def measure_kill(vocab: TokenVocab, workers: int) -> list:
    with ConstraintCompiler(vocab, workers=workers, timeout_s=1.0) as compiler:
        first = timed(lambda: compiler.compile(Constraint.regex("warm")))
        start = time.perf_counter()
        try:
            compiler.compile(pathological())
        except CompileTimeoutError:
            pass
        to_error = time.perf_counter() - start
        cpu = time.process_time()
        time.sleep(2.0)
        burnt = time.process_time() - cpu
        restart = timed(lambda: compiler.compile(Constraint.regex("after"))) if workers else 0.0
    mode = "isolated (worker SIGKILLed)" if workers else "in-thread (stray thread)"
    return [
        mode,
        f"{first:.0f}",
        f"{to_error:.3f}",
        f"{burnt:.2f}",
        f"{restart:.1f}" if workers else "-",
    ]


def measure_memory(vocab: TokenVocab) -> str:
    big = Constraint.choice([f"{i}_" + "y" * 150 for i in range(10_000)])
    with ConstraintCompiler(vocab, workers=1, memory_bytes=8 << 20) as compiler:
        compiler.compile(Constraint.regex("warm"))
        start = time.perf_counter()
        try:
            compiler.compile(big)
            return "not killed"
        except CompileMemoryError:
            return f"{time.perf_counter() - start:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-category", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    vocab = TokenVocab.from_hf(qwen_tokenizer(), VOCAB_SIZE)
    times = measure_latency(vocab, sample_schemas(args.per_category, args.seed), args.per_category)
    base = statistics.median(times["in-thread"])
    rows = [
        [
            m,
            len(t),
            percentile(t, 50),
            percentile(t, 90),
            percentile(t, 99),
            max(t),
            f"{statistics.median(t) - base:+.2f}",
        ]
        for m, t in times.items()
    ]
    print(
        f"compile latency, ms (JSONSchemaBench-dev, {len(times['in-thread'])} schemas, "
        f"Qwen2.5 vocabulary, load {os.getloadavg()[0]:.1f})\n"
    )
    print(table(["mode", "schemas", "p50", "p90", "p99", "max", "p50 vs in-thread"], rows))
    memory = measure_memory(vocab)
    kills = [measure_kill(vocab, w) for w in (1, 0)]  # in-thread last: its stray thread lingers
    print("\npathological compile (oneOf of 3,000 branches), budget 1 s\n")
    print(
        table(
            [
                "mode",
                "first compile ms (worker start)",
                "s to CompileTimeoutError",
                "CPU s of this process in the next 2 s",
                "next compile ms",
            ],
            kills,
        )
    )
    print(f"\nmemory budget 8 MiB, 10,000-way choice: CompileMemoryError after {memory} s")


if __name__ == "__main__":
    main()
