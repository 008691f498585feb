"""The merged 2019-09 / 2020-12 meta-schemas (``json_schema.meta``) give jsonschema's own
verdict, error for error, over the JSON-Schema-Test-Suite's schemas and instances (each read
as a candidate schema); ``check_meta`` keeps its verdicts and messages."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from stencil.constraints.errors import InvalidSchemaError
from stencil.constraints.json_schema import document
from stencil.constraints.json_schema.meta import fast_meta_validator

SUITE = Path(__file__).resolve().parents[2] / "data" / "JSON-Schema-Test-Suite" / "tests"


def _documents() -> list:
    docs = []
    for path in sorted(SUITE.rglob("*.json")):
        for group in json.loads(path.read_text()):
            docs.append(group["schema"])
            docs += [test["data"] for test in group["tests"]]
    return docs


def _errors(validator, document) -> set:
    return {
        (e.validator, tuple(e.absolute_path), e.message) for e in validator.iter_errors(document)
    }


@pytest.mark.parametrize("cls", [jsonschema.Draft201909Validator, jsonschema.Draft202012Validator])
def test_merged_meta_schema_reports_what_the_dynamic_one_reports(cls):
    docs = _documents()
    assert len(docs) > 1000, "the JSON-Schema-Test-Suite ships in tests/data"
    fast, dynamic = fast_meta_validator(cls), cls(cls.META_SCHEMA)
    assert fast is not None
    invalid = 0
    for doc in docs:
        want = _errors(dynamic, doc)
        assert _errors(fast, doc) == want, json.dumps(doc)[:200]
        invalid += bool(want)
    assert 100 < invalid < len(docs) - 100  # both verdicts are well represented


def test_older_drafts_have_no_merged_meta_schema():
    assert fast_meta_validator(jsonschema.Draft7Validator) is None
    assert fast_meta_validator(jsonschema.Draft4Validator) is None


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "strin"}, "/type"),
        ({"properties": {"a": {"minLength": -1}}}, "/properties/a/minLength"),
        ({"properties": {"x": {"items": 3}}}, "/properties/x/items"),
    ],
)
def test_check_meta_still_names_the_invalid_place(schema, where):
    with pytest.raises(InvalidSchemaError) as err:
        document.check_meta(schema, 2020)
    assert where in str(err.value) or err.value.args[-1] == where


def test_check_meta_keeps_harmless_duplicates_and_draft_7_fallback():
    assert document.check_meta({"enum": [1, 1], "required": ["a", "a"]}, 2020) == 2020
    assert document.check_meta({"items": [{"type": "string"}], "definitions": {}}, 2020) == 7
