"""The hand-written extraction corpus (``bench/extract/handwritten/``) stays sound and its
held-out part frozen: every truth is valid for its kind's schema and names every field, every
plain string it states is in its document, and the held-out files and schemas still have the
hashes ``split.json`` recorded before anyone tuned on the dev part."""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator, FormatChecker

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "extract" / "handwritten"
SPLIT = json.loads((CORPUS / "split.json").read_text(encoding="utf-8"))
KINDS = sorted(p.parent.name for p in CORPUS.glob("*/schema.json"))
DOCS = sorted(f"{p.parent.parent.name}/{p.stem}" for p in CORPUS.glob("*/docs/*"))
TRUTH_KEYS = {"language", "format", "values", "absent", "also", "extra", "notes"}


def _schema(kind: str) -> dict:
    return json.loads((CORPUS / kind / "schema.json").read_text(encoding="utf-8"))


def _truth(doc: str) -> dict:
    kind, name = doc.split("/")
    return json.loads((CORPUS / kind / "truth" / f"{name}.json").read_text(encoding="utf-8"))


def _document(doc: str) -> str:
    kind, name = doc.split("/")
    (path,) = (CORPUS / kind / "docs").glob(f"{name}.*")
    return path.read_text(encoding="utf-8")


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _is_plain_string(schema: dict) -> bool:
    return schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(schema)


def _stated_strings(schema: dict, value, path: str):
    """(path, string) for every plain-string value in ``value`` (nested arrays and objects)."""
    if isinstance(value, list):
        for item in value:
            yield from _stated_strings(schema.get("items", {}), item, path)
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _stated_strings(schema["properties"][key], sub, f"{path}.{key}")
    elif isinstance(value, str) and _is_plain_string(schema):
        yield path, value


def _alternatives(truth: dict, schema: dict):
    """(field path, alternative value, its subschema) for every entry of ``also`` and ``extra``."""
    for section in ("also", "extra"):
        for path, alts in truth.get(section, {}).items():
            top, _, sub = path.partition(".")
            prop = schema["properties"][top]
            if sub:
                prop = prop["items"]["properties"][sub]
            elif prop.get("type") == "array":
                prop = prop["items"]
            values = alts if isinstance(alts, list) else [v for vs in alts.values() for v in vs]
            assert values, f"{section}[{path}] is empty"
            for value in values:
                yield path, value, prop


def test_counts():
    languages = {_truth(d)["language"] for d in DOCS}
    assert len(DOCS) >= 110 and len(KINDS) >= 8 and len(languages) >= 4, (
        len(DOCS),
        KINDS,
        languages,
    )
    for kind in KINDS:
        truths = {p.stem for p in (CORPUS / kind / "truth").glob("*.json")}
        assert truths == {d.split("/")[1] for d in DOCS if d.startswith(f"{kind}/")}, kind


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_valid_2020_12(kind):
    Draft202012Validator.check_schema(_schema(kind))


@pytest.mark.parametrize("doc", DOCS)
def test_truth_validates_and_names_every_field(doc):
    kind = doc.split("/")[0]
    schema, truth = _schema(kind), _truth(doc)
    assert set(truth) <= TRUTH_KEYS and {"language", "values", "absent"} <= set(truth), doc
    errors = list(
        Draft202012Validator(schema, format_checker=FormatChecker()).iter_errors(truth["values"])
    )
    assert not errors, [e.message for e in errors]
    stated, absent = set(truth["values"]), set(truth["absent"])
    assert not stated & absent, stated & absent
    assert stated | absent == set(schema["properties"]), set(schema["properties"]) ^ (
        stated | absent
    )
    for path, value, prop in _alternatives(truth, schema):
        errors = list(Draft202012Validator(prop, format_checker=FormatChecker()).iter_errors(value))
        assert not errors, (path, value, [e.message for e in errors])


@pytest.mark.parametrize("doc", DOCS)
def test_stated_strings_occur_in_the_document(doc):
    """A plain string the truth states (or accepts instead) is in the document as written, up to
    case and runs of whitespace (HTML entities decoded)."""
    kind = doc.split("/")[0]
    schema, truth = _schema(kind), _truth(doc)
    text = _squash(html.unescape(_document(doc)))
    strings = list(_stated_strings(schema, truth["values"], "$"))
    strings += [
        (path, value)
        for path, value, prop in _alternatives(truth, schema)
        if isinstance(value, str) and _is_plain_string(prop)
    ]
    missing = [(path, value) for path, value in strings if _squash(value) not in text]
    assert not missing, missing


def test_split_covers_every_document_once():
    assert sorted(SPLIT["dev"] + SPLIT["heldout"]) == DOCS
    assert not set(SPLIT["dev"]) & set(SPLIT["heldout"])
    for kind in KINDS:
        held = [d for d in SPLIT["heldout"] if d.startswith(f"{kind}/")]
        dev = [d for d in SPLIT["dev"] if d.startswith(f"{kind}/")]
        assert len(held) >= 5 and len(dev) >= 3, (kind, dev, held)


def test_heldout_files_and_schemas_are_unchanged():
    """Each held-out document, its truth, and every schema hash as frozen. A changed held-out
    file fails here: the held-out figures are only comparable while they stay as written."""
    frozen = SPLIT["sha256"]
    expected = {f"{kind}/schema.json" for kind in KINDS}
    for doc in SPLIT["heldout"]:
        kind, name = doc.split("/")
        (path,) = (CORPUS / kind / "docs").glob(f"{name}.*")
        expected |= {f"{kind}/docs/{path.name}", f"{kind}/truth/{name}.json"}
    assert set(frozen) == expected, set(frozen) ^ expected
    changed = [
        rel
        for rel, digest in frozen.items()
        if hashlib.sha256((CORPUS / rel).read_bytes()).hexdigest() != digest
    ]
    assert not changed, changed
