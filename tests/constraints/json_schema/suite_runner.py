"""Run JSON-Schema-Test-Suite groups and JSONSchemaBench instances through compiled matchers.

The suite ships in ``tests/data`` (MIT, see its SOURCE.txt); JSONSchemaBench has no licence
file to ship it under, so its tests are the ``corpus`` suite, reading ``--corpus-dir``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constraint_helpers import accepts_text, dumps, schema_ordered

from stencil.constraints import Constraint, ConstraintCompiler, ConstraintError

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "tests" / "data" / "JSON-Schema-Test-Suite" / "tests" / "draft2020-12"
BENCH = "jsonschemabench-dev"  # its folder under --corpus-dir


@dataclass
class Tally:
    groups: int = 0
    compiled: int = 0
    valid: int = 0
    invalid: int = 0
    false_rejections: list[str] = field(default_factory=list)
    false_acceptances: list[str] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def suite_groups(root: Path = SUITE) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(root.glob("*.json")):
        for group in json.loads(path.read_text()):
            out.append((f"{path.stem}: {group['description']}", group))
    return out


def run_group(
    name: str,
    schema: Any,
    tests: list[dict],
    compiler: ConstraintCompiler,
    tokenizer: Any,
    tally: Tally,
) -> None:
    """Compile ``schema`` (exact JSON Schema semantics) and check every instance."""
    tally.groups += 1
    try:
        compiled = compiler.compile(
            Constraint.json_schema(schema, allow_undeclared_properties=True)
        )
    except ConstraintError as exc:
        kind = type(exc).__name__ + (f" {exc.keyword}" if hasattr(exc, "keyword") else "")
        tally.errors[kind] = tally.errors.get(kind, 0) + 1
        return
    tally.compiled += 1
    for test in tests:
        raw = json.dumps(test["data"], ensure_ascii=False)
        texts = [raw, dumps(test["data"]), dumps(schema_ordered(test["data"], schema, schema))]
        if not test["valid"]:
            texts = texts[:1]  # canonical forms (1.0 -> 1) differ in meaning under draft-04
        accepted = any(accepts_text(compiled, tokenizer, t) for t in dict.fromkeys(texts))
        label = f"{name} / {test['description']}: {texts[0][:80]}"
        if test["valid"]:
            tally.valid += 1
            if not accepted:
                tally.false_rejections.append(label)
        else:
            tally.invalid += 1
            if accepted:
                tally.false_acceptances.append(label)


def bench_rows(corpus_dir: Path, category: str) -> list[dict]:
    """JSONSchemaBench-dev's rows of ``category``: ``{id, schema, tests}``."""
    with open(corpus_dir / BENCH / f"{category}.jsonl") as f:
        return [json.loads(line) for line in f]
