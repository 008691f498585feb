"""Extraction throughput: ``stencil extract`` (one batched run over 200 files) vs the notebook way
(a loop of single transformers ``generate`` calls with the same prompts, then ``json.loads``).

    python -m bench.extract.extract_bench [--docs 200] [--baseline-docs 20] [--threads 2]

The baseline is slow, so by default it runs on the first ``--baseline-docs`` documents and its
docs/s is measured there (a rate, so it extrapolates). Model load is excluded on both sides.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import table
from bench.extract.extract_data import SCHEMA, make_documents


def prompts(llm: Any, texts: list[str]) -> list[list[int]]:
    """The exact prompt token ids ``stencil extract`` sends (default template, chat template)."""
    from stencil.extract.engine_backend import EngineExtractor, ExtractSpec
    from stencil.extract.prompt import PromptTemplate

    extractor = EngineExtractor(llm, ExtractSpec(SCHEMA, PromptTemplate.load(None)))
    return [
        extractor._prompt_ids(extractor.builder.build(f"doc{i:03d}.txt", t).messages)
        for i, t in enumerate(texts)
    ]


def run_stencil(llm: Any, texts: list[str], max_tokens: int) -> dict[str, float]:
    """``stencil extract`` over a folder of ``len(texts)`` files (in-process, model preloaded)."""
    from stencil.cli import build_parser
    from stencil.extract.command import run

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "schema.json").write_text(json.dumps(SCHEMA))
        for i, text in enumerate(texts):
            (root / "docs").mkdir(exist_ok=True)
            (root / "docs" / f"doc{i:03d}.txt").write_text(text)
        argv = ["extract", "--schema", str(root / "schema.json"), str(root / "docs"),
                "--out", str(root / "out.jsonl"), "--max-tokens", str(max_tokens)]  # fmt: skip
        start = time.perf_counter()
        run(build_parser().parse_args(argv), llm=llm)
        seconds = time.perf_counter() - start
        records = [json.loads(line) for line in (root / "out.jsonl").read_text().splitlines()]
    ok = sum(r["ok"] for r in records)
    out_tokens = sum(r["tokens"]["completion"] for r in records if r["tokens"])
    return {"docs": len(records), "seconds": seconds, "ok": ok, "out_tokens": out_tokens}


def run_transformers(model_dir: Path, ids: list[list[int]], max_tokens: int) -> dict[str, float]:
    """One ``model.generate`` per document, greedy, unconstrained; then ``json.loads``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ok = out_tokens = 0
    start = time.perf_counter()
    for prompt in ids:
        input_ids = torch.tensor([prompt])
        with torch.inference_mode():
            out = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=tok.eos_token_id,
            )
        new = out[0, input_ids.shape[1] :]
        out_tokens += len(new)
        try:
            json.loads(tok.decode(new, skip_special_tokens=True))
            ok += 1
        except ValueError:
            pass
    seconds = time.perf_counter() - start
    return {"docs": len(ids), "seconds": seconds, "ok": ok, "out_tokens": out_tokens}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--baseline-docs", type=int, default=20, help="0 = all --docs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()

    import torch

    from stencil import LLM, default_model_path

    torch.set_num_threads(args.threads)
    texts = [d.text for d in make_documents(args.docs)]
    start = time.perf_counter()
    llm = LLM(num_threads=args.threads)
    print(f"stencil model load: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    ids = prompts(llm, texts)
    model_dir = default_model_path()  # the same model as an HF directory, for transformers
    stencil = run_stencil(llm, texts, args.max_tokens)
    print(f"stencil: {stencil}", file=sys.stderr)
    del llm
    n_base = args.baseline_docs or args.docs
    base = run_transformers(model_dir, ids[:n_base], args.max_tokens)
    print(f"transformers: {base}", file=sys.stderr)
    print(report(stencil, base, args))
    return 0


def report(stencil: dict[str, float], base: dict[str, float], args: argparse.Namespace) -> str:
    def row(name: str, r: dict[str, float], note: str) -> list:
        rate = r["docs"] / r["seconds"]
        per_doc = r["out_tokens"] / r["docs"]
        valid = f"{r['ok'] / r['docs']:.0%}"
        return [
            name,
            f"{r['docs']:.0f}",
            f"{r['seconds']:.1f}",
            rate,
            f"{per_doc:.1f}",
            valid,
            note,
        ]

    speedup = (stencil["docs"] / stencil["seconds"]) / (base["docs"] / base["seconds"])
    subset = base["docs"] < stencil["docs"]
    note = f"first {base['docs']:.0f} of {args.docs} docs; docs/s extrapolates" if subset else ""
    headers = ["run", "docs", "seconds", "docs/s", "output tok/doc", "valid JSON", "note"]
    rows = [
        row("`stencil extract` (one batched run, schema constraint)", stencil, ""),
        row("transformers `generate` loop (unconstrained + json.loads)", base, note),
    ]
    return (
        f"{args.docs} documents, SmolLM2-135M-Instruct, CPU, {args.threads} threads, greedy, "
        f"max_tokens={args.max_tokens}; model load excluded\n\n{table(headers, rows)}\n\n"
        f"speed-up: {speedup:.1f}x"
    )


if __name__ == "__main__":
    sys.exit(main())
