"""``stencil extract`` throughput, two source trees (or two flag sets) alternated: each run a fresh
process (model load excluded from the timing), warmed on documents outside the workload, over
the same ``--docs`` payment documents of ``extract_data`` (the workload of ``extract_bench``), or
with ``--workload KIND`` documents of one kind from the evaluation corpus's tuning half (the
older tree needs ``bench/extract/corpus.py``).

    python -m bench.extract.extract_ab --tree OLD_CHECKOUT --tree . --tree . --flags= --flags= \\
        --flags=--no-per-field --rounds 3 --docs 40 --threads 1

Each variant is one (tree, flags) pair, in order (a single --tree serves every --flags). Runs
alternate through ``bench.common.compare``; prints the docs/s of every run and each variant's
median, with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

from bench.common import MIN_ROUNDS, compare, median, results, summary, table

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from stencil import LLM
from stencil.cli import build_parser
from stencil.extract.command import run

docs, threads, max_tokens, workload = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
flags = sys.argv[5:]
if workload == "payments":
    from bench.extract.extract_data import SCHEMA, make_documents
    warm, work = [d.text for d in make_documents(8, seed=99)], [d.text for d in make_documents(docs)]
else:  # the evaluation corpus's tuning half, one kind, its library schema
    from bench.extract.corpus import make_corpus
    from stencil.extract.schema_library import resolve_schema
    texts = [d.text for d in make_corpus() if d.kind == workload and d.split == "tune"]
    SCHEMA, warm, work = resolve_schema(workload)[1], texts[-8:], texts[:docs]
    assert len(work) == docs and docs + 8 <= len(texts), "not enough documents of that kind"
llm = LLM(num_threads=threads)

def once(texts):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "schema.json").write_text(json.dumps(SCHEMA))
        (root / "docs").mkdir()
        for i, text in enumerate(texts):
            (root / "docs" / f"doc{i:03d}.txt").write_text(text)
        argv = ["extract", "--schema", str(root / "schema.json"), str(root / "docs"), "--out",
                str(root / "out.jsonl"), "--max-tokens", max_tokens, *flags]
        start = time.perf_counter()
        run(build_parser().parse_args(argv), llm=llm)
        seconds = time.perf_counter() - start
        records = [json.loads(x) for x in (root / "out.jsonl").read_text().splitlines()]
    return seconds, sum(r["ok"] for r in records)

once(warm)  # warm-up, outside the workload
seconds, ok = once(work)
print(json.dumps({"seconds": seconds, "ok": ok}))
"""


def docs_per_second(tree: str, extra: str, args: argparse.Namespace) -> float:
    """One run of a variant in a fresh process (its model load outside the timing)."""
    root = str(Path(tree).resolve())
    cmd = [sys.executable, "-c", CHILD, str(args.docs), str(args.threads), str(args.max_tokens)]
    cmd += [args.workload, *extra.split()]
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree} {extra}: rc {done.returncode}\n{done.stderr[-2000:]}")
    res = json.loads(done.stdout.strip().splitlines()[-1])
    if res["ok"] != args.docs:
        print(f"{tree} {extra or '(default)'}: {res['ok']}/{args.docs} ok", file=sys.stderr)
    return args.docs / res["seconds"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--flags", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument(
        "--workload",
        default="payments",
        help="payments (extract_data) or a corpus kind: invoice, receipt, ...",
    )
    args = ap.parse_args()
    flags = args.flags or [""]
    n = max(len(args.tree), len(flags))
    variants = [
        (args.tree[min(i, len(args.tree) - 1)], flags[min(i, len(flags) - 1)]) for i in range(n)
    ]
    runs = compare(
        {
            i: partial(docs_per_second, tree, extra, args)
            for i, (tree, extra) in enumerate(variants)
        },
        args.rounds,
    )
    rows = []
    for i, (tree, extra) in enumerate(variants):
        rates = results(runs[i])
        rows.append(
            [
                tree,
                extra or "(default)",
                f"{median(rates):.2f}",
                ", ".join(f"{x:.2f}" for x in rates),
            ]
        )
    print(f"\n{args.docs} documents ({args.workload}); {summary(runs, args.rounds)}\n")
    print(table(["tree", "flags", "docs/s (median)", "runs"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
