"""Compile rate over every JSONSchemaBench-dev row and JSON-Schema-Test-Suite (2020-12) group,
exact semantics (``allow_undeclared_properties=True``), in-thread, with the refusals counted by
message.

    python -m bench.constraints.compile_rate [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from stencil.constraints import Constraint, ConstraintCompiler, ConstraintError, TokenVocab

CATEGORIES = ("Github_easy", "Github_medium", "Glaiveai2K")


def corpora(data: Path) -> dict[str, list]:
    out = {}
    for category in CATEGORIES:
        rows = (data / "jsonschemabench-dev" / f"{category}.jsonl").open()
        out[category] = [json.loads(line)["schema"] for line in rows]
    suite = sorted((data / "JSON-Schema-Test-Suite" / "tests" / "draft2020-12").glob("*.json"))
    out["JSON-Schema-Test-Suite"] = [g["schema"] for p in suite for g in json.loads(p.read_text())]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[3] / "shared" / "data")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from stencil.engine.models.default_model import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    compiler = ConstraintCompiler(TokenVocab.from_hf(tokenizer), workers=0)
    print("| set | schemas | compiled | refused (most common) |\n|---|---|---|---|")
    for name, schemas in corpora(args.data).items():
        refused: collections.Counter[str] = collections.Counter()
        for schema in schemas:
            constraint = Constraint.json_schema(schema, allow_undeclared_properties=True)
            try:
                compiler.compile(constraint)
            except ConstraintError as exc:
                refused[str(exc)[:70]] += 1
        compiled = len(schemas) - sum(refused.values())
        common = "; ".join(f"{n} x {m}" for m, n in refused.most_common(2))
        print(
            f"| {name} | {len(schemas)} | {compiled} ({compiled / len(schemas):.2%}) | {common} |"
        )


if __name__ == "__main__":
    main()
