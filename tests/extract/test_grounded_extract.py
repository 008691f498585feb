"""``stencil extract --grounded`` with the embedded model: every plain string field of the record
is a verbatim span of its document, and the record is valid for the schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from stencil import cli
from stencil.extract.schema_library import resolve_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_grounded_invoice_values_are_spans_of_the_document(tmp_path):
    doc = EXAMPLES / "invoice.txt"
    out = tmp_path / "out.jsonl"
    argv = ["extract", "--schema", "invoice", str(doc), "--out", str(out), "--grounded",
            "--max-tokens", "160", "--num-threads", "1", "--kv-cache-memory", "67108864"]  # fmt: skip
    assert cli.main(argv) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["ok"], record
    _, schema = resolve_schema("invoice")
    jsonschema.validate(record["data"], schema)
    text = doc.read_text()
    props = schema["properties"]
    plain = [k for k, v in props.items() if v.get("type") == "string" and "format" not in v
             and "pattern" not in v]  # fmt: skip
    assert plain
    for key in plain:
        if key in record["data"]:
            assert record["data"][key] in text, (key, record["data"][key])
    for item in record["data"].get("line_items", []):
        assert item["description"] in text, item
