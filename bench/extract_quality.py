"""Extraction quality: field-level accuracy of the embedded model with the schema constraint vs the
same prompts unconstrained + ``json.loads``, on 50 labeled template documents.

    python bench/extract_quality.py [--docs 50] [--threads 2] [--max-tokens 96]

Prints a markdown table (accuracy per field and overall, share of outputs that parse/validate).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from extract_data import FIELDS, SCHEMA, field_correct, make_documents

from stencil.extract.prompt import PromptTemplate
from stencil.extract.records import make_validator


def prompts(llm: Any, texts: list[str]) -> list[list[int]]:
    """The exact prompts ``stencil extract`` sends (default template, chat template)."""
    from stencil.extract.engine_backend import EngineExtractor, ExtractSpec

    extractor = EngineExtractor(llm, ExtractSpec(SCHEMA, PromptTemplate.load(None)))
    out = []
    for i, text in enumerate(texts):
        messages = extractor.builder.build(f"doc{i:03d}.txt", text).messages
        out.append(extractor._prompt_ids(messages))
    return out


def parse(text: str, lenient: bool) -> Any:
    """``json.loads``; lenient: the first ``{...}`` block (code fences, chatter around it)."""
    if lenient:
        match = re.search(r"\{.*\}", text, re.DOTALL)
        text = match.group(0) if match else text
    try:
        return json.loads(text)
    except ValueError:
        return None


def score(outputs: list[str], labels: list[dict], lenient: bool) -> dict[str, float]:
    validator = make_validator(SCHEMA)
    correct = dict.fromkeys(FIELDS, 0)
    parsed = valid = 0
    for text, label in zip(outputs, labels, strict=True):
        data = parse(text, lenient)
        if not isinstance(data, dict):
            continue
        parsed += 1
        valid += validator.is_valid(data)
        for f in FIELDS:
            correct[f] += field_correct(f, label[f], data.get(f))
    n = len(labels)
    row = {f: correct[f] / n for f in FIELDS}
    row["all fields"] = sum(correct.values()) / (n * len(FIELDS))
    row["parses"] = parsed / n
    row["schema-valid"] = valid / n
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()

    from stencil import LLM, SamplingParams
    from stencil.constraints import Constraint

    docs = make_documents(args.docs)
    labels = [d.label for d in docs]
    llm = LLM(num_threads=args.threads)
    ids = prompts(llm, [d.text for d in docs])
    constraint = Constraint.json_schema(SCHEMA, whitespace="compact")
    runs = {
        "unconstrained + json.loads": SamplingParams(max_tokens=args.max_tokens, temperature=0),
        "stencil (schema constraint)": SamplingParams(
            max_tokens=args.max_tokens, temperature=0, constraint=constraint, close_on_length=True
        ),
    }
    rows: dict[str, dict[str, float]] = {}
    texts: dict[str, list[str]] = {}
    for name, params in runs.items():
        start = time.perf_counter()
        outs = llm.generate(ids, params, use_tqdm=False)
        texts[name] = [o.outputs[0].text for o in outs]
        rows[name] = score(texts[name], labels, lenient=False)
        print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    free = texts["unconstrained + json.loads"]
    rows["unconstrained + lenient parse (first {...})"] = score(free, labels, lenient=True)
    print(table(rows, len(docs)))
    print("\nunconstrained samples:", *[repr(t[:120]) for t in free[:3]], sep="\n  ")
    return 0


def table(rows: dict[str, dict[str, float]], n: int) -> str:
    cols = [*FIELDS, "all fields", "parses", "schema-valid"]
    lines = [
        f"SmolLM2-135M-Instruct, {n} labeled documents, greedy; field-level exact-match accuracy",
        "",
        "| run | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.0%}" for c in cols) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
