"""schemathesis against the server's OpenAPI document (``/openapi.json``): property-based requests
to every operation (coverage phase + ``--max-examples`` fuzzed cases each, valid and invalid),
checked for server errors. The server runs a tiny random-weight model (the HTTP path is what is
tested; generation stays fast whatever ``max_tokens`` and ``n`` the fuzzer picks).

    python bench/schemathesis_bench.py                     # 200 examples per operation
    python bench/schemathesis_bench.py --max-examples 20 --phases fuzzing
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import table  # noqa: E402
from serve_process import start_serve  # noqa: E402

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
    """A tiny random-weight Llama with SmolLM2's tokenizer (tests/engine's builder)."""
    sys.path.insert(0, str(ROOT / "tests" / "engine"))
    from engine_helpers import build_tiny_model

    import stencil

    return build_tiny_model("llama-tied", out, Path(stencil.default_model_path()))


def run_schemathesis(
    base_url: str, key: str, max_examples: int, phases: str, seed: int, workers: int, out: Path
) -> Report:
    cmd = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{base_url}/openapi.json",
        "-H", f"Authorization: Bearer {key}", "--checks", "not_a_server_error",
        "--max-examples", str(max_examples), "--phases", phases, "--seed", str(seed),
        "--workers", str(workers), "--request-timeout", "120", "--suppress-health-check", "all",
        "--report", "ndjson", "--report-ndjson-path", str(out), "--no-color",
        "--generation-database", "none",
    ]  # fmt: skip
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


def print_report(report: Report) -> None:
    rows = []
    for label, op in sorted(report.operations.items()):
        statuses = ", ".join(f"{s}x{n}" for s, n in sorted(op.statuses.items()))
        fuzz, cov = op.cases["fuzzing"], op.cases["coverage"]
        errors = sum(n for s, n in op.statuses.items() if s >= 500)
        rows.append([label, fuzz, cov, statuses, errors])
    heads = ["operation", "fuzzed cases", "coverage cases", "statuses", "5xx"]
    print(table(heads, rows))
    print(
        f"\nschemathesis exit code {report.exit_code}, {report.seconds:.0f} s, "
        f"{report.server_errors} server errors, {len(report.tool_errors)} tool errors"
    )
    for e in report.tool_errors:
        print(f"- tool error (not a server response): {e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-examples", type=int, default=200)
    parser.add_argument("--phases", default="coverage,fuzzing")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stencil-schemathesis-"))
    try:
        model = tiny_model(tmp / "tiny")
        flags = ("--model", str(model), "--constraint-compile-timeout", "2")
        with start_serve(*flags, api_key=KEY) as server:
            report = run_schemathesis(
                server.base_url,
                KEY,
                args.max_examples,
                args.phases,
                args.seed,
                args.workers,
                tmp / "report.ndjson",
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n## schemathesis: {args.max_examples} examples per operation, phases {args.phases}\n")
    print_report(report)
    ok = report.server_errors == 0 and report.exit_code == 0
    print("\nresult:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
