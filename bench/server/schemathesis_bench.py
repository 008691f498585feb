"""schemathesis against the server's OpenAPI document (``/openapi.json``): property-based requests
to every operation (coverage phase + ``--max-examples`` fuzzed cases each, valid and invalid),
checked for server errors. The server runs a tiny random-weight model (the HTTP path is what is
tested; generation stays fast whatever ``max_tokens`` and ``n`` the fuzzer picks).

    python -m bench.server.schemathesis_bench                     # 200 examples per operation
    python -m bench.server.schemathesis_bench --max-examples 20 --phases fuzzing
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import table
from stencil.testing.schemathesis_run import KEY, Report, run_schemathesis, tiny_model
from stencil.testing.serve_process import start_serve


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
