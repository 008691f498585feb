"""The document's labels narrow each field before it is asked (``field_plan``, ``labels``), on
short documents written by hand in the shapes of real ones (not the evaluation corpus's)."""

from __future__ import annotations

import json

import pytest
from test_extract_fixtures import INVOICE_DE

from stencil.extract.field_plan import FieldPlan
from stencil.extract.labels import LabelIndex
from stencil.extract.regions import distinct_row_items
from stencil.extract.schema_library import resolve_schema

INVOICE = resolve_schema("invoice")[1]
RECEIPT = resolve_schema("receipt")[1]
LETTER = resolve_schema("letter")[1]

EN = """ACME CLOUD SERVICES LTD.
12 Harbour Road, Bristol BS1 4QA

INVOICE #INV-2025-118          Date: 14 March 2025
Bill to: Globex Corporation, 5 Elm St, Springfield
Payment due: 13 April 2025

Qty  Description                 Unit      Amount
2    Cloud hosting (Feb)       600.00    1,200.00
1    Support plan              380.00      380.00

Subtotal                                 1,580.00
VAT 20%                                    316.00
Total due                               £1,896.00
"""
DE = INVOICE_DE
ONE_LINE = """From: Brightline Consulting Inc., San Francisco
To: Harbor Logistics LLC

Invoice #INV-7781        Issued: 2025-06-30      Due: 2025-07-30

For the audit support delivered in Q2 2025 (88 hours) we charge USD 15,750.00.
"""
FR = """Plomberie Martin SARL
Facture n° F-7781 du 2 avril 2025

Client : Mme Durand

Remplacement chauffe-eau       1 234,56
Total TTC : 1 234,56 €
"""
NO_LABELS = """Fresh Bakes
Oxford Street, London
2025-05-06 09:12

Croissant        2.40
Flat white       3.10

4.50 paid
"""


def _plan(schema: dict, doc: str, answers: dict | None = None) -> dict[str, object]:
    """Each asked field -> its allowed values (``enum``) or ``"free"``, answering each with
    ``answers[field]`` (else its first allowed value)."""
    answers = dict(answers or {})
    given: dict[str, str] = {}
    asked: dict[str, object] = {}
    for q in FieldPlan(schema, doc, numbers=True, dates=True).questions(given):
        sub = q.schema["properties"][q.key]
        asked[q.key] = sub.get("enum", "free")
        value = answers.get(q.key, sub["enum"][0] if "enum" in sub else None)
        given[q.key] = json.dumps({q.key: value}) if value is not None else "{}"
    return asked


@pytest.mark.parametrize(
    ("doc", "field", "allowed"),
    [
        (EN, "total", [1896.0]),  # not the subtotal, the VAT or a quantity
        (DE, "total", [1249.5]),
        (FR, "total", [1234.56]),  # "1 234,56", not 1 or 234.56
        (NO_LABELS, "total", [4.5]),  # no Total label: the largest amount of money
        (EN, "invoice_number", ["#INV-2025-118"]),
        (DE, "invoice_number", ["2025-0042"]),
        (FR, "invoice_number", ["F-7781"]),
        (EN, "due_date", ["2025-04-13"]),
        (DE, "due_date", ["2025-02-17"]),
        (EN, "issue_date", ["2025-03-14"]),
        (FR, "issue_date", "free"),  # "du 2 avril": no date label; the pool's one date
        (EN, "buyer", ["Globex Corporation"]),  # the name, not the address after it
        (DE, "buyer", ["Café Morgenrot"]),
        (FR, "buyer", ["Mme Durand"]),
        (EN, "seller", ["ACME CLOUD SERVICES LTD."]),  # the letterhead
        (FR, "seller", ["Plomberie Martin SARL"]),
        (ONE_LINE, "issue_date", ["2025-06-30"]),  # a bare "Issued:", not the due date beside it
        (ONE_LINE, "due_date", ["2025-07-30"]),
    ],
)
def test_labelled_values(doc, field, allowed):
    asked = _plan(INVOICE, doc)
    if allowed == "free":
        assert asked[field] in ("free", ["2025-04-02"])
    else:
        assert asked[field] == allowed


@pytest.mark.parametrize(
    ("schema", "doc", "not_asked"),
    [
        (INVOICE, FR, {"due_date"}),  # no due label
        (INVOICE, NO_LABELS, {"buyer", "due_date", "invoice_number"}),
        (RECEIPT, NO_LABELS, {"tax", "payment_method"}),  # "paid" names no method
        (LETTER, "Anna Berg\n\nDear Tom,\nthanks.\n", {"subject"}),
    ],
)
def test_optional_fields_without_their_labels_are_not_asked(schema, doc, not_asked):
    asked = _plan(schema, doc)
    assert not_asked.isdisjoint(asked)
    assert set(schema["required"]) <= set(asked)


def test_second_party_differs_from_the_first():
    doc = "Anna Berg\nMain Street 1\n\nTom Weller\nRiver Lane 2\n\nDear Tom,\nthanks.\n"
    asked = _plan(LETTER, doc)
    assert asked["sender"] == ["Anna Berg"]
    assert asked["recipient"] == ["Tom Weller"]  # the sender's name is taken


def test_payment_method_from_the_words_the_document_prints():
    doc = "Kiosk Sonne\nSumme: 4,20 EUR\nBezahlt mit Karte\n"
    assert _plan(RECEIPT, doc)["payment_method"] == ["card"]


def test_label_index_reads_values_after_labels_and_on_the_next_line():
    doc = "Bill to:\nInitech LLC\nTotal:   EUR 2.400,00\nMwSt. 19 %: 383,19\n"
    index = LabelIndex(doc)
    assert index.names(index.of(("buyer",))) == ["Initech LLC"]
    assert index.numbers(index.of(("total",))) == [2400.0]
    assert index.numbers(index.of(("tax",))) == [383.19]  # not the 19 %


@pytest.mark.parametrize(
    ("items", "kept"),
    [
        ([{"description": "Cloud hosting (Feb)", "quantity": 2, "amount": 1200.0}], 1),
        ([{"description": "Support plan", "amount": 380.0}] * 2, 1),  # one row, one item
        ([{"description": "Subtotal", "amount": 1580.0}], 0),  # a labelled line
        ([{"description": "Support", "amount": 380.0}], 0),  # not the row's whole text
        ([{"description": "Support plan", "amount": 1.0}], 0),  # not the row's amount
        ([{"description": "Bill to", "amount": 5.0}], 0),
    ],
)
def test_items_come_from_table_rows(items, kept):
    assert len(distinct_row_items(items, EN)) == kept


def test_items_in_prose_are_not_rows():
    prose = "Please pay the total amount of 2,400.00 EUR for the work done in 2024.\n"
    items = [{"description": "Please pay the total amount of", "amount": 2024.0}]
    assert distinct_row_items(items, prose) == []
