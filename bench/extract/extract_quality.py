"""Extraction quality: field-level accuracy of the embedded model on 50 labeled template documents,
through ``stencil extract``'s own engine backend: prompt variants (the schema in the system
prompt, a field list there instead, a worked example that cannot be copied, the document first
then the fields, the fields before and after the document: the default) times modes (schema
constraint; + grounded strings; + grounded numbers; + grounded dates), beside the unconstrained
model.

    python -m bench.extract.extract_quality [--docs 50] [--threads 2] [--max-tokens 96] [--model PATH]

``--model`` scores another model (a directory or a ``.gguf`` file, kept quantized), such as the
embedded model's own Q4_1 file in ``~/.cache/stencil/downloads``.

Prints a markdown table: accuracy per field, their mean, the share of documents with every field
right, and the shares of outputs that parse / validate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

from bench.common import table
from bench.extract.extract_data import FIELDS, SCHEMA, field_correct, make_documents
from stencil import LLM, SamplingParams
from stencil.extract.engine_backend import EngineExtractor, ExtractSpec
from stencil.extract.prompt import DEFAULT_TEMPLATE, PromptTemplate
from stencil.extract.records import Job, make_validator


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
    parsed = valid = exact = 0
    for text, label in zip(outputs, labels, strict=True):
        data = parse(text, lenient)
        if not isinstance(data, dict):
            continue
        parsed += 1
        valid += validator.is_valid(data)
        right = [field_correct(f, label[f], data.get(f)) for f in FIELDS]
        exact += all(right)
        for f, ok in zip(FIELDS, right, strict=True):
            correct[f] += ok
    n = len(labels)
    row = {f: correct[f] / n for f in FIELDS}
    row["field mean"] = sum(correct.values()) / (n * len(FIELDS))
    row["all fields exact"] = exact / n
    row["parses"] = parsed / n
    row["schema-valid"] = valid / n
    return row


EXAMPLE = (
    'Example (another schema): the document "Order 5512 shipped on 2001-02-03 to Jo Q. Public '
    'in Springfield." gives {"customer":"Jo Q. Public","city":"Springfield"}.\n'
)
SCHEMA_PROMPT = """\
You extract data from documents. Reply with one JSON object that follows this JSON Schema. \
Copy names, dates, numbers and emails exactly as written in the document; do not invent values.
{instructions}
JSON Schema:
{schema}
---
Document ({filename}):
{document}"""
DOCUMENT_FIRST = """\
You extract data from documents. Copy values exactly as written in the document.
---
Document ({filename}):
{document}

Reply with one JSON object with these fields:
{fields}
{instructions}"""
PROMPTS = {
    "schema in system prompt": SCHEMA_PROMPT,
    "field list in system prompt": SCHEMA_PROMPT.replace(
        "JSON Schema:\n{schema}", "Fields:\n{fields}"
    ).replace("follows this JSON Schema", "has these fields"),
    "worked example": SCHEMA_PROMPT.replace("{instructions}", "{instructions}" + EXAMPLE),
    "document first + field list": DOCUMENT_FIRST,
    "field list, document, field list (default)": DEFAULT_TEMPLATE,
}
OFF = {"grounded": False, "ground_numbers": False, "ground_dates": False}
MODES = {
    "schema": OFF,
    "schema + grounded strings": {**OFF, "grounded": True},
    "schema + grounded strings + numbers": {**OFF, "grounded": True, "ground_numbers": True},
    "schema + grounded strings + numbers + dates (default)": {
        "grounded": True,
        "ground_numbers": True,
        "ground_dates": True,
    },
}


def extract(llm: Any, docs: list[Any], template: str, max_tokens: int, **mode: Any) -> list[str]:
    """What ``stencil extract`` answers for each document (its engine backend, in order)."""
    spec = ExtractSpec(SCHEMA, PromptTemplate.parse(template), max_tokens=max_tokens, **mode)
    jobs = [Job(i, f"doc{i:03d}.txt", d.text) for i, d in enumerate(docs)]
    texts = {o.key: o.text or "" for o in EngineExtractor(llm, spec).run(jobs)}
    return [texts[i] for i in range(len(docs))]


def unconstrained(llm: Any, docs: list[Any], max_tokens: int) -> list[str]:
    spec = ExtractSpec(SCHEMA, PromptTemplate.parse(SCHEMA_PROMPT))
    extractor = EngineExtractor(llm, spec)
    ids = [
        extractor._prompt_ids(extractor.builder.build(f"doc{i:03d}.txt", d.text).messages)
        for i, d in enumerate(docs)
    ]
    outs = llm.generate(ids, SamplingParams(max_tokens=max_tokens, temperature=0), use_tqdm=False)
    return [o.outputs[0].text for o in outs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--prompts", nargs="+", default=list(PROMPTS), choices=list(PROMPTS))
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--no-unconstrained", action="store_true")
    ap.add_argument(
        "--model", default=None, help="a model directory or .gguf file (default: embedded)"
    )
    args = ap.parse_args()

    docs = make_documents(args.docs)
    labels = [d.label for d in docs]
    llm = LLM(args.model, num_threads=args.threads)
    rows: dict[str, dict[str, float]] = {}
    if not args.no_unconstrained:
        free = unconstrained(llm, docs, args.max_tokens)
        rows["schema in system prompt, unconstrained + json.loads"] = score(
            free, labels, lenient=False
        )
        rows["schema in system prompt, unconstrained + lenient parse"] = score(
            free, labels, lenient=True
        )
    for prompt in args.prompts:
        for mode in args.modes:
            start = time.perf_counter()
            texts = extract(llm, docs, PROMPTS[prompt], args.max_tokens, **MODES[mode])
            rows[f"{prompt}, {mode}"] = score(texts, labels, lenient=False)
            print(f"{prompt} / {mode}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(report(rows, len(docs), args.model or "SmolLM2-135M-Instruct (embedded)"))
    return 0


def report(rows: dict[str, dict[str, float]], n: int, model: str) -> str:
    cols = [*FIELDS, "field mean", "all fields exact", "parses", "schema-valid"]
    cells = [[name, *(f"{row[c]:.0%}" for c in cols)] for name, row in rows.items()]
    title = f"{model}, {n} labeled documents, greedy; field-level exact-match accuracy"
    return f"{title}\n\n{table(['run', *cols], cells)}"


if __name__ == "__main__":
    sys.exit(main())
