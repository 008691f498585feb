"""What rfc3987-syntax's stand-in (``stencil.constraints.deferred_rfc3987``) saves each process:
a fresh interpreter importing what a compile worker imports (the constraints front end as bare
packages, no engine), with the stand-in installed first, as the worker's bootstrap does, and
without it (jsonschema's import then builds rfc3987-syntax's Earley parser). Prints a markdown
table: wall and CPU seconds per process, medians of alternated runs.

    python -m bench.constraints.import_bench --rounds 5
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import compare, results, summary, table

ROOT = Path(__file__).resolve().parents[2] / "stencil"
BARE = f"""
import sys, types
for name, path in (("stencil", {str(ROOT)!r}), ("stencil.constraints", {str(ROOT / "constraints")!r})):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
"""
MODES = {
    "stand-in": BARE + "import stencil.constraints.deferred_rfc3987\n"
    "import stencil.constraints.isolation.worker",
    "eager": BARE + "import stencil.constraints.isolation.worker",
}


def run(code: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    calls = {mode: lambda c=code: run(c) for mode, code in MODES.items()}
    runs = compare(calls, args.rounds, warm=calls)  # the first runs fill the OS's file cache
    rows = [
        [mode, statistics.median(w for w, _ in got), statistics.median(c for _, c in got)]
        for mode, got in ((m, results(r)) for m, r in runs.items())
    ]
    print(table(["worker's imports", "wall s", "CPU s"], rows))
    print(f"\n{summary(runs, args.rounds)}")


if __name__ == "__main__":
    main()
