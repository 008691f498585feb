"""What grounding costs: compile time of a grounded schema by document size, and the mask time per
token inside a grounded string beside the same schema's free string. SmolLM2's vocabulary
(the embedded model), one thread, no compile cache. Prints a markdown table.

    python bench/grounding_bench.py --sizes 1 10 30 100 --repeats 5

Documents are made of the README example documents (examples/*), repeated up to the size. The
mask is timed along the tokens of a value copied from the end of the document (the longest
path through the substring automaton after the last decimal number, which the schema's
``total: number`` sibling makes a barrier); the free string is timed along the same tokens. The
first pass over a fresh compile is what decoding meets (llguidance builds the lexer's states
lazily); the second pass shows the mask with those states built.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

from stencil import default_model_path
from stencil.constraints import Constraint, ConstraintCompiler, TokenVocab
from stencil.constraints.bitmask import allocate_token_bitmask

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {
    "type": "object",
    "properties": {"seller": {"type": "string"}, "total": {"type": "number"}},
    "required": ["seller", "total"],
}

DECIMAL = re.compile(r"[0-9][0-9,]*\.[0-9]+")


def document(kib: int) -> str:
    parts = [p.read_text(errors="replace") for p in sorted((ROOT / "examples").iterdir())]
    text = "\n".join(parts)
    return (text * (kib * 1024 // len(text) + 1))[: kib * 1024]


def tail_value(doc: str) -> str:
    """A value copied from the document's end (as JSON string content): whole words after the
    last decimal number (a barrier beside the schema's ``total: number``)."""
    tail = DECIMAL.split(doc[-120:])[-1]
    return json.dumps(tail[tail.index(" ") :].strip(), ensure_ascii=False)[1:-1]


def mask_times(compiled, tokenizer, value: str) -> list[float]:
    matcher = compiled.new_matcher()
    prefix = tokenizer.encode('{"seller": "', add_special_tokens=False)
    for t in prefix:
        assert matcher.accept_token(t)
    mask = allocate_token_bitmask(1, compiled.vocab.vocab_size)
    out = []
    for t in tokenizer.encode(value, add_special_tokens=False):
        start = time.perf_counter()
        matcher.fill_next_token_bitmask(mask, 0)
        out.append((time.perf_counter() - start) * 1e6)
        assert matcher.accept_token(t), "the value is not accepted"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 30, 100], help="KiB")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    vocab = TokenVocab.from_hf(tokenizer)
    rows = []
    for kib in args.sizes:
        doc = document(kib)
        value = tail_value(doc)
        compile_ms, grounded_us, warm_us, free_us = [], [], [], []
        for _ in range(args.repeats):
            compiler = ConstraintCompiler(vocab, cache_bytes=0)
            start = time.perf_counter()
            c = Constraint.json_schema(SCHEMA, source_text=doc, ground_strings=True)
            compiled = compiler.compile(c)
            compile_ms.append((time.perf_counter() - start) * 1e3)
            grounded_us += mask_times(compiled, tokenizer, value)
            warm_us += mask_times(compiled, tokenizer, value)  # the lexer's states now built
            free_us += mask_times(
                compiler.compile(Constraint.json_schema(SCHEMA)), tokenizer, value
            )
        g, f = statistics.median(grounded_us), statistics.median(free_us)
        w = statistics.median(warm_us)
        rows.append(
            f"| {kib} | {statistics.median(compile_ms):.1f} | {max(compile_ms):.1f} "
            f"| {g:.1f} | {w:.1f} | {f:.1f} | {g / f:.2f}x | {w / f:.2f}x |"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(
        "| document KiB | compile ms p50 | max | grounded mask µs p50 | same, second pass "
        "| free string mask µs p50 | ratio | second pass ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
