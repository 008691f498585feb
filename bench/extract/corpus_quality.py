"""Extraction quality on the evaluation corpus (``corpus.py``): ``stencil extract``'s engine
backend with its default flags (grounded, default prompt, greedy) over each document with its
library schema; exact match per field and per document kind, "present when absent" for fields the
document does not state, and the issue's groups (totals, parties, currency, dates, invented line
items, absent fields, schema-valid).

    python -m bench.extract.corpus_quality [--split tune|heldout] [--per-kind N] [--model PATH]
        [--kinds invoice receipt ...] [--langs en de ...] [--dump out.jsonl] [--threads 2]

The held-out split is for the final figures only: tune on ``--split tune`` (the default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from typing import Any

from bench.extract.corpus import make_corpus
from bench.extract.scoring import Tally
from stencil import LLM
from stencil.extract.engine_backend import EngineExtractor, ExtractSpec
from stencil.extract.prompt import PromptTemplate
from stencil.extract.records import Job, make_validator
from stencil.extract.schema_library import resolve_schema


def run(
    llm: Any, docs: list[Any], max_tokens: int, dump: Any, per_field: bool
) -> tuple[Tally, int]:
    """Score every document; returns the tally and the output tokens generated."""
    tally, tokens = Tally(), 0
    by_schema: dict[str, list[Any]] = defaultdict(list)
    for d in docs:
        by_schema[d.schema].append(d)
    for name, group in by_schema.items():
        _, schema = resolve_schema(name)
        validator = make_validator(schema)
        spec = ExtractSpec(
            schema, PromptTemplate.load(None), max_tokens=max_tokens, per_field=per_field
        )
        jobs = [Job(i, f"{d.id}.txt", d.text) for i, d in enumerate(group)]
        for out in EngineExtractor(llm, spec).run(jobs):
            d = group[out.key]
            tokens += out.completion_tokens or 0
            try:
                data = json.loads(out.text) if out.error is None else None
            except ValueError:
                data = None
            valid = data is not None and validator.is_valid(data)
            tally.add(d.kind, d.label, data, valid)
            if dump:
                row = {"id": d.id, "label": d.label, "data": data, "error": out.error}
                dump.write(json.dumps(row, ensure_ascii=False) + "\n")
    return tally, tokens


def rescore(path: str) -> str:
    """The report for the documents a ``--dump`` file holds (a run cut short scores its part)."""
    docs = {d.id: d for d in make_corpus()}
    tally = Tally()
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            d = docs[row["id"]]
            validator = make_validator(resolve_schema(d.schema)[1])
            data = row["data"]
            tally.add(d.kind, d.label, data, data is not None and validator.is_valid(data))
    return tally.report(f"{path}: {sum(n for n, _, _ in tally.docs.values())} documents")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["tune", "heldout", "all"], default="tune")
    ap.add_argument("--per-kind", type=int, default=None, help="first N documents of each kind")
    ap.add_argument("--kinds", nargs="+", default=None)
    ap.add_argument("--langs", nargs="+", default=None)
    ap.add_argument("--max-tokens", type=int, default=256, help="stencil extract's default")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None, help="a model directory or .gguf (default: embedded)")
    ap.add_argument("--one-request", action="store_true", help="one request per document")
    ap.add_argument("--dump", default=None, help="write each document's output here (JSONL)")
    ap.add_argument("--rescore", default=None, help="score a --dump file (no model run)")
    args = ap.parse_args()
    if args.rescore:
        print(rescore(args.rescore))
        return 0

    docs = [d for d in make_corpus() if args.split in ("all", d.split)]
    docs = [d for d in docs if (args.kinds is None or d.kind in args.kinds)
            and (args.langs is None or d.lang in args.langs)]  # fmt: skip
    if args.per_kind is not None:
        seen: dict[str, int] = defaultdict(int)
        docs = [d for d in docs if (seen.__setitem__(d.kind, seen[d.kind] + 1) or seen[d.kind])
                <= args.per_kind]  # fmt: skip
    llm = LLM(args.model, num_threads=args.threads)
    start = time.perf_counter()
    with open(args.dump, "w", encoding="utf-8") if args.dump else open(os.devnull, "w") as dump:
        tally, tokens = run(
            llm, docs, args.max_tokens, dump if args.dump else None, not args.one_request
        )
    seconds = time.perf_counter() - start
    model = args.model or "SmolLM2-135M-Instruct (embedded)"
    print(f"{model}; split {args.split}; {len(docs)} documents; {seconds:.0f} s "
          f"({len(docs) / seconds:.2f} docs/s, {tokens / len(docs):.0f} output tok/doc); "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(tally.report("stencil extract, default flags (grounded), greedy"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
