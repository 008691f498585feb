"""The cost of one document, field by field vs one whole-record question, per model: the same
document through ``stencil extract`` in each mode, alternated A B A B (``bench.common.compare``,
each mode warmed first on a document of its own), under a fresh file name
each run and a line naming the run at its end (so no run finds the document in the prefix
cache or its constraints in the compile cache; the instructions and field list before it are
shared, as in a real run).

    python -m bench.extract.per_field_cost --rounds 3 --threads 1 \\
        --model embedded --model qwen2.5-coder-1.5b [--flags=--no-grounded]

``--model``: ``embedded`` (the default SmolLM2-135M), a real GGUF by its registry name
(``stencil.testing.real_models``), or a path. Prints every run (seconds, prompt tokens the
engine computed vs took from the prefix cache, output tokens) and per model and mode the median
seconds, documents per minute and per-field / whole-record, with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import MIN_ROUNDS, compare, median, results, summary, table

MODES = {"per-field": [], "whole-record": ["--no-per-field"]}
DOCUMENT = Path(__file__).resolve().parents[2] / "examples" / "invoice.txt"


def _llm(name: str, threads: int) -> Any:
    from stencil import LLM

    if name == "embedded":
        return LLM(num_threads=threads)
    if not os.path.exists(name):
        from stencil.testing.real_models import real_model_path

        name = str(real_model_path(name))
    return LLM(name, num_threads=threads, max_model_len=4096)


def _once(llm: Any, root: Path, name: str, flags: list[str], max_tokens: int) -> dict[str, Any]:
    from stencil.cli import build_parser
    from stencil.extract.command import run

    doc = root / name
    tag = name.translate(str.maketrans("0123456789.", "abcdefghij "))  # no number added
    text = DOCUMENT.read_text(encoding="utf-8") + f"Filed by the archive desk as {tag}.\n"
    doc.write_text(text, encoding="utf-8")  # a new text each run: no compile cache hit
    out = root / f"{name}.jsonl"
    argv = [
        "extract",
        "--schema",
        "invoice",
        str(doc),
        "--out",
        str(out),
        "--max-tokens",
        str(max_tokens),
        *flags,
    ]
    before = llm.get_metrics()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the run's own summary table
        run(build_parser().parse_args(argv), llm=llm)
    seconds = time.perf_counter() - start
    after = llm.get_metrics()
    (record,) = [json.loads(x) for x in out.read_text().splitlines()]
    hits = after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"]
    prompt = after["prompt_tokens_total"] - before["prompt_tokens_total"]
    compile_s = (
        after["constraint_compile_seconds_total"] - before["constraint_compile_seconds_total"]
    )
    mask_s = after["guided_mask_seconds_total"] - before["guided_mask_seconds_total"]
    return {
        "seconds": seconds,
        "computed": int(prompt - hits),
        "cached": int(hits),
        "compile_s": compile_s,
        "mask_s": mask_s,
        "output": int(after["generation_tokens_total"] - before["generation_tokens_total"]),
        "ok": record["ok"],
        "data": record.get("data"),
        "error": record.get("error"),
    }


def _report(res: dict[str, Any]) -> str:
    """One run, as the progress line prints it."""
    return (
        f"{res['seconds']:.1f} s, prompt tokens computed {res['computed']} / cached "
        f"{res['cached']}, output {res['output']}, compile {res['compile_s']:.1f} s, masks "
        f"{res['mask_s']:.1f} s, ok={res['ok']} {res['data'] or res['error']}"
    )


def model_rows(model: str, root: Path, args: argparse.Namespace) -> tuple[list[list], str]:
    """Per mode: the median of alternated runs on one model, and the harness's summary line."""
    llm = _llm(model, args.threads)
    extra, names = args.flags.split(), itertools.count()

    def one(mode: str) -> dict[str, Any]:
        name = f"{model.replace('/', '_')}-{mode}-{next(names)}.txt"
        res = _once(llm, root, name, MODES[mode] + extra, args.max_tokens)
        print(f"{model} {mode}: {_report(res)}", flush=True)
        return res

    warm = {
        m: lambda m=m: _once(llm, root, f"warm-{m}.txt", MODES[m] + extra, args.max_tokens)
        for m in MODES
    }
    runs = compare({m: lambda m=m: one(m) for m in MODES}, args.rounds, warm)
    per, whole = (median([x["seconds"] for x in results(runs[m])]) for m in MODES)
    rows = []
    for mode in MODES:
        got = results(runs[mode])
        med = {k: median([x[k] for x in got]) for k in ("seconds", "computed", "cached", "output")}
        rows.append(
            [
                model,
                mode,
                f"{med['seconds']:.1f}",
                f"{60 / med['seconds']:.2f}",
                ", ".join(f"{x['seconds']:.1f}" for x in got),
                f"{med['computed']:.0f} / {med['cached']:.0f}",
                f"{med['output']:.0f}",
                f"{median([len(x['data'] or {}) for x in got]):.0f}",
                f"{per / whole:.2f}x",
            ]
        )
    return rows, f"{model}: {summary(runs, args.rounds)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--flags", default="", help="extra stencil extract flags for both modes")
    args = ap.parse_args()
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.model or ["embedded"]:
            got, note = model_rows(model, Path(tmp), args)
            rows += got
            notes.append(note)
    heads = ["model", "mode", "s/doc (median)", "docs/min", "runs (s)"]
    heads += ["prompt tokens computed / cached", "output tokens", "fields filled"]
    print()
    print(table([*heads, "per-field / whole"], rows))
    print(f"\nflags: {args.flags or '(default)'}; threads {args.threads}; " + "; ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
