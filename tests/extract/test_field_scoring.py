"""The hand-written corpus's scorer (``stencil.testing.field_scoring``): each field kind's
matching rule, absent fields, array items and the counts, on records written out by hand."""

from __future__ import annotations

import pytest

from stencil.testing.field_scoring import score_record

SCHEMA = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "total": {"type": "number"},
        "issued": {"type": "string", "format": "date"},
        "method": {"type": "string", "enum": ["cash", "card"]},
        "paid": {"type": "boolean"},
        "due": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "price": {"type": "number"},
                    "qty": {"type": "integer"},
                },
                "required": ["name", "price"],
            },
        },
    },
    "required": ["vendor", "total"],
}
DOCUMENT = "ACME Tools Ltd.  Invoice 4 March 2024. Hammer 12.50, Saw (x2) 30.00. Total 42.50 N/A"
TRUTH = {
    "values": {
        "vendor": "ACME Tools Ltd",
        "total": 42.5,
        "issued": "2024-03-04",
        "method": "card",
        "paid": True,
        "tags": ["Hammer", "Saw"],
        "lines": [{"name": "Hammer", "price": 12.5}, {"name": "Saw", "price": 30, "qty": 2}],
    },
    "absent": ["due"],
    "also": {"tags": {"Saw": ["Saw (x2)"]}, "lines.name": {"Saw": ["Saw (x2)"]}},
    "extra": {"tags": ["Invoice"]},
}
RIGHT = {
    "vendor": "  acme  tools LTD. ",
    "total": 42.50000001,
    "issued": "2024-03-04",
    "method": "card",
    "paid": True,
    "tags": ["Invoice", "saw (x2)", "hammer"],
    "lines": [{"name": "Saw (x2)", "price": 30.0, "qty": 2}, {"name": "Hammer", "price": 12.5}],
    "due": None,
}


def _tally(data, ok=True):
    return score_record(SCHEMA, TRUTH, {"ok": ok, "data": data}, DOCUMENT)


def test_every_field_right():
    t = _tally(RIGHT)
    assert t.ratio("fields right") == (8, 8)
    assert t.ratio("optional-field recall") == (5, 5)
    assert t.ratio("absent fields absent") == (1, 1)
    assert t.ratio("array-item recall") == (4, 4)
    assert t.ratio("array-item precision") == (4, 4)  # the extra "Invoice" is not counted
    assert t.ratio("item sub-fields right") == (2, 2)
    assert t.counts["invented values"] == t.counts["strings not in the document"] == 0


@pytest.mark.parametrize(
    "field, value, kind",
    [
        ("vendor", "ACME Tools", "string"),
        ("total", 42.51, "number"),
        ("total", "42.50", "number"),
        ("issued", "2024-04-03", "date"),
        ("method", "cash", "enum"),
        ("paid", 1, "boolean"),
    ],
)
def test_one_wrong_scalar(field, value, kind):
    t = _tally({**RIGHT, field: value})
    assert t.ratio("fields right") == (7, 8)
    assert t.ratio(f"kind: {kind}")[0] == t.ratio(f"kind: {kind}")[1] - 1


@pytest.mark.parametrize(
    "value, right", [(None, True), ("", True), ([], True), ("2024-05-01", False)]
)
def test_absent_field(value, right):
    t = _tally({**RIGHT, "due": value})
    assert t.ratio("absent fields absent") == (int(right), 1)
    assert t.counts["invented values"] == int(not right)


def test_array_items_recall_and_precision():
    t = _tally({**RIGHT, "tags": ["Hammer", "Nails", "Glue"]})
    assert t.ratio("array-item recall") == (1 + 2, 2 + 2)
    assert t.ratio("array-item precision") == (1 + 2, 3 + 2)
    assert t.counts["invented values"] == 2
    assert t.ratio("kind: array of strings") == (0, 1)


def test_object_items_match_on_required_sub_fields():
    lines = [{"name": "Saw", "price": 30, "qty": 3}, {"name": "Hammer", "price": 99}]
    t = _tally({**RIGHT, "lines": lines})
    assert t.ratio("array-item recall") == (2 + 1, 2 + 2)  # Hammer's price is wrong
    assert t.ratio("item sub-fields right") == (0, 1)  # the saw's qty
    assert t.ratio("kind: array of objects") == (0, 1)


def test_a_missing_optional_field_costs_recall():
    t = _tally({k: v for k, v in RIGHT.items() if k != "method"})
    assert t.ratio("optional-field recall") == (4, 5)
    assert t.ratio("present fields right") == (6, 7)


def test_a_failed_file_gets_no_field_right():
    t = score_record(SCHEMA, TRUTH, {"ok": False, "error": "boom"}, DOCUMENT)
    assert t.ratio("files ok") == (0, 1)
    assert t.ratio("fields right") == (0, 8)
    assert t.ratio("absent fields absent") == (0, 1)


@pytest.mark.parametrize(
    "vendor, placeholder, unstated",
    [("value", 1, 1), ("N/A", 0, 0), ("Globex", 0, 1), ("ACME Tools", 0, 0)],
)
def test_placeholders_and_strings_not_in_the_document(vendor, placeholder, unstated):
    t = _tally({**RIGHT, "vendor": vendor})
    assert t.counts["placeholder values"] == placeholder
    assert t.counts["strings not in the document"] == unstated
