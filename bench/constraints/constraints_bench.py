"""Constraint engines side by side on the Qwen2.5 vocabulary: Stencil, llguidance (raw),
xgrammar and outlines-core over a seeded JSONSchemaBench-dev sample plus regexes, choices
and two Lark grammars. Prints a markdown table.

    python -m bench.constraints.constraints_bench --per-category 100

compile = wall time of the compile call (Stencil: schema translation + validation, the first
stage of ``compile``, are included); mask = one fill of a packed int32 bitmask row
over the full vocabulary, along the tokens of valid instances; FR = valid instance rejected
(a token masked out, or not complete at the end); FA = invalid instance fully accepted.
Instances are ``json.dumps`` texts (", " / ": " separators), tokenized canonically. Stencil
runs with exact JSON Schema semantics for undeclared keys (``allow_undeclared_properties=True``);
llguidance with its defaults, xgrammar with ``strict_mode=False`` (objects and arrays open, as
JSON Schema says; ``engines.py``). Each engine runs in its own process; a case (compile +
instances) over ``--timeout`` kills and restarts it and counts as not compiled.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.common import jsonschemabench_dir, percentile, table
from bench.constraints.engines import ENGINES, VOCAB_SIZE, qwen_tokenizer

# ----------------------------------------------------------------------------- workloads

REGEXES = {
    "phone": (r"\(?[0-9]{3}\)?[ -]?[0-9]{3}-[0-9]{4}", ["(555) 123-4567", "555-123-4567"]),
    "email": (r"[a-z0-9._%+-]{1,30}@[a-z0-9.-]{1,20}\.[a-z]{2,6}", ["ada.lovelace@math.org"]),
    "iso_date": (r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", ["2024-02-29"]),
    "ipv4": (
        r"((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])",
        ["192.168.0.1"],
    ),
    "nested_quant": (r"(a+)+b", ["aaaaaaaab"]),
    "ab_window": (r"[ab]*a[ab]{20}", ["bbba" + "ab" * 10]),
}
CHOICES = {
    "sentiment": (["positive", "negative", "neutral"], ["neutral"]),
    "countries_200": ([f"Country {i:03d}" for i in range(200)], ["Country 042"]),
}
LARKS = {
    "arithmetic": (
        'start: expr\n?expr: term | expr ("+" | "-") term\n?term: atom | term ("*" | "/") atom\n'
        '?atom: NUMBER | "(" expr ")"\nNUMBER: /[0-9]+/\n',
        ["(1+2)*3", "4/5-6"],
    ),
    "sql_select": (
        'start: "SELECT " cols " FROM " NAME where?\ncols: "*" | NAME (", " NAME)*\n'
        'where: " WHERE " NAME " = " VALUE\nNAME: /[a-z_][a-z0-9_]*/\nVALUE: /[0-9]+/ | /\'[a-z ]*\'/\n',
        ["SELECT a, b FROM t WHERE a = 3", "SELECT * FROM users"],
    ),
}
CATEGORIES = ("Github_easy", "Github_medium", "Glaiveai2K")
REPO = Path(__file__).resolve().parents[2]
DATA = jsonschemabench_dir()
SUITE = REPO / "tests" / "data" / "JSON-Schema-Test-Suite" / "tests" / "draft2020-12"


# ----------------------------------------------------------------------------- measuring


@dataclass
class Stats:
    n: int = 0
    compiled: int = 0
    correct: int = 0
    compile_ms: list[float] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    mask_cpu_us: list[float] = field(default_factory=list)
    valid: int = 0
    invalid: int = 0
    fr: int = 0
    fa: int = 0

    def add(self, other: Stats) -> None:
        for name in ("n", "compiled", "correct", "valid", "invalid", "fr", "fa"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.compile_ms += other.compile_ms
        self.mask_us += other.mask_us
        self.mask_cpu_us += other.mask_cpu_us


def run_text(
    engine: Any, handle: Any, tokens: list[int], mask: torch.Tensor, times: tuple[list, list]
) -> bool:
    """Feed one instance token by token, timing each mask fill (wall and this thread's CPU
    time: the CPU column does not count time the shared machine took the core away); True
    when fully accepted."""
    state = engine.start(handle)
    for token in tokens:
        wall, cpu = time.perf_counter(), time.thread_time()
        engine.fill(state, mask)
        times[1].append((time.thread_time() - cpu) * 1e6)
        times[0].append((time.perf_counter() - wall) * 1e6)
        if not (mask[0, token // 32] >> (token % 32)) & 1 or not engine.advance(state, token):
            return False
    return engine.finish(state)


class Worker:
    """One engine in its own spawned process (tokenizer and engine built once). A case past
    its budget kills the process, which is restarted: runaway peer compiles can neither hang
    the run nor take the machine's memory."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(self.name, child_conn), daemon=True)
        self.proc.start()
        self.conn.recv()  # ready

    def run(self, case: tuple, timeout_s: float) -> dict | None:
        self.conn.send(case)
        if self.conn.poll(timeout_s):
            return self.conn.recv()
        self.proc.kill()
        self.proc.join()
        self._start()
        return None

    def close(self) -> None:
        self.proc.kill()


def _worker_main(name: str, conn: Any) -> None:
    tok = qwen_tokenizer()
    engine = ENGINES[name](tok, VOCAB_SIZE, tok.eos_token_id)
    conn.send("ready")
    mask = torch.full((1, (VOCAB_SIZE + 31) // 32), -1, dtype=torch.int32)
    while True:
        kind, payload, good, bad = conn.recv()
        try:
            start = time.perf_counter()
            handle = engine.compile(kind, payload)
            compile_ms = (time.perf_counter() - start) * 1e3
        except Exception:  # noqa: BLE001 - every engine error counts as a failure
            conn.send(None)
            continue
        times: tuple[list, list] = ([], [])
        fr = sum(not run_text(engine, handle, tok.encode(t), mask, times) for t in good)
        fa = sum(run_text(engine, handle, tok.encode(t), mask, ([], [])) for t in bad)
        conn.send({"compile_ms": compile_ms, "mask": times[0], "cpu": times[1], "fr": fr, "fa": fa})


def run_case(worker: Worker, case: tuple, stats: Stats, timeout_s: float) -> None:
    stats.n += 1
    result = worker.run(case, timeout_s)
    if result is None:
        return
    _, _, good, bad = case
    stats.compiled += 1
    stats.compile_ms.append(result["compile_ms"])
    stats.mask_us += result["mask"]
    stats.mask_cpu_us += result["cpu"]
    stats.valid += len(good)
    stats.invalid += len(bad)
    stats.fr += result["fr"]
    stats.fa += result["fa"]
    stats.correct += result["fr"] + result["fa"] == 0


def schema_cases(per_category: int, seed: int, warmup: int) -> tuple[list, list]:
    """``(cases, warm-up cases)``: (set, case) pairs of the seeded JSONSchemaBench-dev sample,
    and ``warmup`` rows from past the sample (outside the workload)."""
    cases, warm = [], []
    for category in CATEGORIES:
        rows = [json.loads(line) for line in (DATA / f"{category}.jsonl").open()]
        random.Random(seed).shuffle(rows)
        cases += [(category, _json_case(r["schema"], r["tests"])) for r in rows[:per_category]]
        warm += [_json_case(r["schema"], r["tests"]) for r in rows[-warmup:]] if warmup else []
    return cases, warm


def suite_cases() -> list:
    out = []
    for path in sorted(SUITE.glob("*.json")):
        for group in json.loads(path.read_text()):
            out.append(("JSON-Schema-Test-Suite", _json_case(group["schema"], group["tests"])))
    return out


def _json_case(schema: Any, tests: list[dict]) -> tuple:
    texts = {
        v: [json.dumps(t["data"], ensure_ascii=False) for t in tests if t["valid"] is v]
        for v in (True, False)
    }
    return ("json", schema, texts[True], texts[False])


# ----------------------------------------------------------------------------- reporting


def num(v: float) -> str:
    return "–" if v != v else (f"{v:,.1f}" if v < 100 else f"{v:,.0f}")


def rate(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.1f}%)" if b else "–"


COLUMNS = (  # (header, Stats field, percentile)
    ("compile ms p50", "compile_ms", 50),
    ("p99", "compile_ms", 99),
    ("mask µs p50", "mask_us", 50),
    ("p99", "mask_us", 99),
    ("p99.9", "mask_us", 99.9),
    ("mask CPU µs p50", "mask_cpu_us", 50),
    ("p99", "mask_cpu_us", 99),
    ("p99.9", "mask_cpu_us", 99.9),
)


def cells(rounds: list[Stats]) -> list[float]:
    """Each column's median over the rounds."""
    return [
        statistics.median(percentile(getattr(s, attr), q) for s in rounds) for _, attr, q in COLUMNS
    ]


def results_table(results: dict[tuple[str, str], list[Stats]]) -> str:
    head = ["set", "engine", "compiled", "compiled & correct", *(c[0] for c in COLUMNS)]
    head += ["FR (valid rejected)", "FA (invalid accepted)"]
    rows = []
    for (group, engine), rounds in results.items():
        s = rounds[0]
        row = [group, engine, rate(s.compiled, s.n), rate(s.correct, s.n)]
        row += [num(v) for v in cells(rounds)] + [rate(s.fr, s.valid), rate(s.fa, s.invalid)]
        rows.append(row)
    return table(head, rows)


def ratios(results: dict[tuple[str, str], list[Stats]], base: str) -> str:
    """Each engine's columns over ``base``'s on the same set."""
    rows = []
    for (group, engine), rounds in results.items():
        if engine == base or (group, base) not in results:
            continue
        ours, theirs = cells(rounds), cells(results[(group, base)])
        ratio = [f"{a / b:.2f}x" for a, b in zip(ours, theirs, strict=True)]
        rows.append([group, f"{engine} / {base}", *ratio])
    return table(["set", "engine", *(c[0] for c in COLUMNS)], rows)


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--per-category", type=int, default=100, help="schemas sampled per category"
    )
    parser.add_argument("--outlines-per-category", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="per-case budget (s)")
    parser.add_argument("--engines", default="stencil,llguidance,xgrammar,outlines-core")
    parser.add_argument("--suite", action="store_true", help="add the JSON-Schema-Test-Suite")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds (medians reported)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up schemas per category")
    args = parser.parse_args()
    workers = {}
    for name in args.engines.split(","):
        start = time.perf_counter()
        workers[name] = Worker(name)
        print(f"{name}: prepare {time.perf_counter() - start:.1f}s", file=sys.stderr)
    cases, warm = schema_cases(args.per_category, args.seed, args.warmup)
    cases += suite_cases() if args.suite else []
    cases += [(f"regex:{k}", ("regex", p, good, [])) for k, (p, good) in REGEXES.items()]
    cases += [(f"choice:{k}", ("choice", p, good, [])) for k, (p, good) in CHOICES.items()]
    cases += [(f"lark:{k}", ("lark", p, good, [])) for k, (p, good) in LARKS.items()]
    # outlines-core compiles take seconds: the first few cases of each category only
    rank = [sum(g == group for g, _ in cases[:i]) for i, (group, _) in enumerate(cases)]
    for case in warm:  # outside the workload: first-use costs (tables, lexers) paid here
        for worker in workers.values():
            worker.run(case, args.timeout)
    load = [os.getloadavg()[0]]
    results: dict[tuple[str, str], list[Stats]] = {}
    common: dict[tuple[str, str], list[Stats]] = {}  # JSON sets: cases every engine compiled
    for round_ in range(args.rounds):
        for i, (group, case) in enumerate(cases):
            few = rank[i] < args.outlines_per_category
            names = [n for n in workers if n != "outlines-core" or few]
            names = names[i % len(names) :] + names[: i % len(names)]  # alternate who goes first
            ones = {}
            for name in names:
                ones[name] = one = Stats()
                run_case(workers[name], case, one, args.timeout)
                rounds = results.setdefault((group, name), [])
                rounds += [Stats() for _ in range(round_ + 1 - len(rounds))]
                rounds[round_].add(one)
            pool = "JSB" if group in CATEGORIES else group
            if case[0] == "json" and all(one.compiled for one in ones.values()):
                for name, one in ones.items():
                    rounds = common.setdefault((f"{pool}, compiled by all", name), [])
                    rounds += [Stats() for _ in range(round_ + 1 - len(rounds))]
                    rounds[round_].add(one)
        load.append(os.getloadavg()[0])
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    for worker in workers.values():
        worker.close()
    pooled: dict[tuple[str, str], list[Stats]] = {}
    for (group, name), rounds in results.items():
        if group in CATEGORIES:
            mine = pooled.setdefault(("JSB pooled", name), [Stats() for _ in rounds])
            for total, s in zip(mine, rounds, strict=True):
                total.add(s)
    order = list(workers)
    results = {**common, **pooled, **results}
    results = dict(sorted(results.items(), key=lambda kv: order.index(kv[0][1])))
    groups = list(dict.fromkeys(g for g, _ in results))
    results = dict(sorted(results.items(), key=lambda kv: groups.index(kv[0][0])))
    print(
        f"Qwen2.5 vocabulary ({VOCAB_SIZE}), {args.per_category} schemas per category "
        f"(outlines-core: {args.outlines_per_category}), seed {args.seed}, "
        f"{'JSON-Schema-Test-Suite 2020-12, ' if args.suite else ''}per-case budget "
        f"{args.timeout:g}s (over budget = not compiled); engines alternated per case; "
        f"{args.rounds} round(s), medians; load average (1 min) "
        f"{min(load):.1f}-{max(load):.1f}\n"
    )
    print(results_table(results))
    if "llguidance" in workers:
        print()
        print(ratios(results, "llguidance"))


if __name__ == "__main__":
    main()
