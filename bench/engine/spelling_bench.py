"""Does drafting structure as the output spelled it (``spec_decode/spelling.py``) help, per model?

One speculative engine per model (ngram, k 5), the grounded set and ``stencil extract``'s field
questions of ``latency_bench`` (one request at a time, greedy), run twice on the same engine:
``as spelled`` (the drafter's ``Spelling``: forced text and a key's closer drafted as this
output, or the latest one, split it) and ``as tokenized`` (a ``Spelling`` that records nothing:
forced text drafted as the tokenizer splits it). The outputs must be identical; the counts are
deterministic (no timing): draft tokens, accepted ones, and decode steps (output tokens less
accepted drafts: one step per token the model samples), so the machine's load does not matter.

    python -m bench.engine.spelling_bench [--models embedded qwen2.5-coder-0.5b ...]
        [--workloads grounded extract] [--max-tokens 128] [--threads 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import table
from bench.engine.latency_bench import extract_jobs, grounded_requests, run, run_extract
from stencil import LLM, default_model_path
from stencil.engine.spec_decode.spelling import Spelling
from stencil.testing.real_models import real_model_path

SPEC = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}


class AsTokenized(Spelling):
    """Records nothing: every text is drafted as the tokenizer splits it."""

    def update(self, spelled, tokens, start, first) -> None:
        return None


def model_path(name: str) -> str:
    if name == "embedded":
        return str(default_model_path())
    return str(Path(name)) if Path(name).exists() else str(real_model_path(name))


def measure(name: str, args) -> list[list]:
    kw = dict(num_threads=args.threads, max_model_len=2048, kv_cache_memory=512 << 20)
    llm = LLM(model_path(name), speculative_config=SPEC, **kw)
    drafter = llm.engine.drafter
    workloads = {
        "grounded": lambda: run(llm, grounded_requests(args.max_tokens), 1),
        "extract": lambda: run_extract(llm, extract_jobs(args.max_tokens)),
    }
    workloads = {w: fn for w, fn in workloads.items() if w in args.workloads}
    rows, outs = [], {}
    variants = {"as spelled": drafter.spelling, "as tokenized": AsTokenized(drafter.tokenizer)}
    for variant, spelling in variants.items():
        drafter.spelling = spelling
        for workload, fn in workloads.items():
            got = fn()
            outs.setdefault(workload, got["outs"])
            same = got["outs"] == outs[workload]
            tokens = got["tokens"]
            steps = tokens - int(got["accepted"])
            drafted, accepted = int(got["drafted"]), int(got["accepted"])
            ratio = f"{tokens / steps:.3f}"
            rows.append([name, workload, variant, tokens, drafted, accepted, steps, ratio, same])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["embedded", "qwen2.5-coder-0.5b"])
    ap.add_argument("--workloads", nargs="+", default=["grounded", "extract"])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rows = [r for name in args.models for r in measure(name, args)]
    heads = ["model", "workload", "structure drafted", "output tokens", "drafted"]
    heads += ["accepted", "decode steps", "tokens / step", "same output"]
    print(table(heads, rows))


if __name__ == "__main__":
    main()
