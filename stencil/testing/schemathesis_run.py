"""schemathesis against the server's OpenAPI document (``/openapi.json``): run it, parse its
NDJSON report into per-operation case and status counts. The server under test runs a tiny
random-weight model (``tiny_model``): the HTTP path is what is tested.

Used by ``tests/api/test_schemathesis_smoke.py`` and ``bench/server/schemathesis_bench.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

KEY = "sk-schemathesis"


@dataclass
class OperationStats:
    cases: Counter = field(default_factory=Counter)  # phase -> test cases
    statuses: Counter = field(default_factory=Counter)


@dataclass
class Report:
    exit_code: int
    operations: dict[str, OperationStats]
    tool_errors: list[str]
    seconds: float

    @property
    def server_errors(self) -> int:
        return sum(n for op in self.operations.values() for s, n in op.statuses.items() if s >= 500)


def tiny_model(out: Path) -> Path:
    """A tiny random-weight Llama with SmolLM2's tokenizer."""
    import stencil
    from stencil.testing.tiny_models import build_tiny_model

    return build_tiny_model("llama-tied", out, Path(stencil.default_model_path()))


def run_schemathesis(
    base_url: str, key: str, max_examples: int, phases: str, seed: int, workers: int, out: Path
) -> Report:
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{base_url}/openapi.json",
        "-H",
        f"Authorization: Bearer {key}",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        str(max_examples),
        "--phases",
        phases,
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--request-timeout",
        "120",
        "--suppress-health-check",
        "all",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(out),
        "--no-color",
        "--generation-database",
        "none",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=out.parent)
    if not out.is_file():
        raise RuntimeError(
            f"schemathesis wrote no report:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    report = parse_ndjson(out, proc.returncode)
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
    return report


def parse_ndjson(path: Path, exit_code: int) -> Report:
    ops: dict[str, OperationStats] = {}
    errors: list[str] = []
    started = finished = 0.0
    for line in path.read_text().splitlines():
        event = json.loads(line)
        kind, body = next(iter(event.items()))
        if kind == "EngineStarted":
            started = body["timestamp"]
        elif kind == "EngineFinished":
            finished = body["timestamp"]
        elif kind == "NonFatalError":
            errors.append(str(body.get("label") or body)[:300])
        elif kind == "ScenarioFinished":
            _count(ops, body)
    return Report(exit_code, ops, errors, finished - started)


def _count(ops: dict[str, OperationStats], body: dict) -> None:
    recorder = body["recorder"]
    stats = ops.setdefault(recorder["label"], OperationStats())
    stats.cases[body["phase"]] += len(recorder.get("cases", {}))
    for interaction in recorder.get("interactions", {}).values():
        response = interaction.get("response") or {}
        stats.statuses[response.get("status_code", 0)] += 1
