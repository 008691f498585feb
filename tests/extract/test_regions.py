"""The record check (``regions``): labels a value starts with, sibling values it ends with, line
items from table rows, on short documents written by hand in the shapes of real ones (not the
evaluation corpus's); the label index it reads (``DocumentIndex``)."""

from __future__ import annotations

import pytest

from stencil.constraints import DocumentIndex, without_label
from stencil.extract.regions import check_record, distinct_row_items
from stencil.extract.schema_library import resolve_schema

INVOICE = resolve_schema("invoice")[1]

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


def test_label_index_finds_values_after_labels_and_on_the_next_line():
    doc = "Bill to:\nInitech LLC\nTotal:   EUR 2.400,00\nMwSt. 19 %: 383,19\n"
    index = DocumentIndex(doc)
    values = {c: doc[h.value[0] : h.value[1]].strip(" :") for h in index.labels for c in h.concepts}
    assert values["buyer"] == "Initech LLC"
    assert values["total"] == "EUR 2.400,00"
    assert values["tax"] == "19 %: 383,19"


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("Kunde: Café Morgenrot", "Café Morgenrot"),
        ("Bill to: Globex", "Globex"),
        ("From: Acme", "Acme"),
        ("Total Gym Ltd", "Total Gym Ltd"),  # a label word without its colon is a name
        ("Rechnung Nr. 2025-0042", "Rechnung Nr. 2025-0042"),
    ],
)
def test_a_value_loses_a_label_it_starts_with(value, kept):
    assert without_label(value) == kept


@pytest.mark.parametrize(
    ("venue", "city", "kept"),
    [
        ("Harbor Park, Providence", "Providence", "Harbor Park"),
        ("Salle Rameau – Lyon", "Lyon", "Salle Rameau"),
        ("Harbor Park Providence", "Providence", "Harbor Park Providence"),  # no separator
        ("Harbor Park, Providence", "Boston", "Harbor Park, Providence"),  # not the city's
        ("Providence", "Providence", "Providence"),  # the same value: not a part of it
        ("Old Providence", "Providence", "Old Providence"),
    ],
)
def test_a_value_loses_a_sibling_value_it_ends_with(venue, city, kept):
    schema = {
        "type": "object",
        "properties": {"venue": {"type": "string"}, "city": {"type": "string"}},
    }
    doc = f"Meet at {venue}. See you in {city}!"
    assert check_record(schema, {"venue": venue, "city": city}, doc)["venue"] == kept


@pytest.mark.parametrize(
    ("items", "kept"),
    [
        ([{"description": "Cloud hosting (Feb)", "quantity": 2, "amount": 1200.0}], 1),
        ([{"description": "Support plan", "amount": 380.0}] * 2, 1),  # one row, one item
        ([{"description": "Subtotal", "amount": 1580.0}], 0),  # a labelled line
        ([{"description": "Support", "amount": 380.0}], 1),  # the row holds it, partly named
        ([{"description": "Support plan", "amount": 1.0}], 0),  # not the row's amount
        ([{"description": "Bill to", "amount": 5.0}], 0),
    ],
)
def test_items_come_from_table_rows(items, kept):
    assert len(distinct_row_items(items, DocumentIndex(EN))) == kept


def test_a_date_label_without_a_date_leaves_a_row():
    """``data`` labels a date (Italian, Portuguese), but ``Data transfer`` names a line item."""
    doc = "Compute   $842.10\nData transfer   $87.00\nDate 01/11/2026   $5.00\nTotal  $934.10\n"
    items = [
        {"description": "Data transfer", "amount": 87.0},
        {"description": "Date", "amount": 5.0},  # a date's line is no item's row
    ]
    assert distinct_row_items(items, DocumentIndex(doc)) == items[:1]


@pytest.mark.parametrize(
    ("needed", "kept"),
    [
        (frozenset({"description", "amount"}), [{"description": "Support plan", "amount": 380.0}]),
        (None, []),  # the item schema names no required field: every part must be on the row
        (frozenset({"description", "quantity", "amount"}), []),
    ],
)
def test_an_optional_part_off_the_row_leaves_the_item_not_the_row(needed, kept):
    """A quantity its row does not state (a number read elsewhere) is left out of the item,
    the row's description and amount kept, where the item schema says quantity is optional."""
    item = {"description": "Support plan", "quantity": 4, "amount": 380.0}
    assert distinct_row_items([item], DocumentIndex(EN), needed) == kept
    items = {"type": "object", "properties": dict.fromkeys(item, {})}
    if needed is not None:
        items["required"] = sorted(needed)
    schema = {"type": "object", "properties": {"lines": {"type": "array", "items": items}}}
    assert check_record(schema, {"lines": [item]}, EN) == ({"lines": kept} if kept else {})


def test_a_description_above_its_amount_is_the_rows():
    """A row whose description stands on the lines above its amount (an e-mailed invoice)."""
    doc = (
        "INVOICE PR-0326\n\nWebsite copy for the new product pages\n"
        "  6 pages @ £85.00 per page ........ £510.00\n\nRevisions to the About us page (flat\n"
        "fee, agreed by email) .............. £120.00\n\nTOTAL DUE ........... £810.00\n"
    )
    items = [
        {"description": "Website copy for the new product pages", "amount": 510.0},
        {
            "description": "Revisions to the About us page (flat fee, agreed by email)",
            "amount": 120.0,
        },
        {"description": "INVOICE PR-0326", "amount": 810.0},  # no row of its own
    ]
    assert distinct_row_items(items, DocumentIndex(doc)) == items[:2]


def test_a_month_before_the_amount_leaves_a_row():
    """A row that names a month (``Miete März 2026``) and ends with its amount is a row."""
    doc = "Miete März 2026   850,00\nMiete April 2026   850,00\nGesamt   1.700,00\n"
    items = [{"description": "Miete März 2026", "amount": 850.0}]
    assert distinct_row_items(items, DocumentIndex(doc)) == items


def test_items_in_prose_are_not_rows():
    prose = EN + "Please pay the total amount of 2,400.00 EUR for the work done in 2024.\n"
    items = [{"description": "Please pay the total amount of", "amount": 2024.0}]
    assert distinct_row_items(items, DocumentIndex(prose)) == []


@pytest.mark.parametrize(
    "cv",
    [
        "Experience\nData engineer at Cabify (2023-now): Spark.\nAnalyst at BBVA (2020-2023).\n",
        "Praxe\n09/2023 – dosud\nCabify, Data engineer\n04/2020 – 08/2023\nBBVA, Analyst\n",
        "Cabify, Data engineer\n*Sept. 2023 – Mar. 2025*\nBBVA, Analyst\n*2020 – 2023*\n",
        "Cabify, Data engineer (2023-now)\nBBVA, Analyst (2020-2023)\n\nCourses\nSpark  2021\n"
        "English  C1\nCertificate in Advanced English (C1), 2019\n",  # years end lines
    ],
)
def test_items_of_a_document_without_a_table_stand(cv):
    """A CV's jobs with their years: no line is a table row (a period such as ``04/2020 -
    08/2023`` ends with a number, but is no item's row); each item kept once."""
    jobs = [{"employer": "Cabify", "from_year": 2023}, {"employer": "BBVA", "from_year": 2020}]
    assert distinct_row_items([*jobs, jobs[0]], DocumentIndex(cv)) == jobs


def test_a_description_runs_on_to_its_cells_end():
    """A line item's name that stops inside its table cell (a small model drops a size:
    ``WD-40`` of ``WD-40 400ml``; a pack size after a comma) is the whole cell; not a bounded
    string, not one that does not start its cell, not over another part of the item."""
    doc = (
        "WD-40 400ml                  £5.49\nPaint roller set, blue        £8.50\n"
        "| SW-1 | Marathon Plus 28 x 1.50 | 2 | € 71,80\nTOTAL              £85.79\n"
    )
    item = {"type": "object", "properties": {"name": {"type": "string"}, "price": {}}}
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": item}}}
    got = [
        {"name": "WD-40", "price": 5.49},
        {"name": "Paint roller set", "price": 8.5},
        {"name": "Marathon Plus 28 x", "price": 71.8},
    ]
    assert [i["name"] for i in check_record(schema, {"items": got}, doc)["items"]] == [
        "WD-40 400ml",
        "Paint roller set, blue",
        "Marathon Plus 28 x 1.50",
    ]
    item["properties"]["colour"] = {"type": "string"}
    paint = {"name": "Paint roller set", "colour": "blue", "price": 8.5}
    assert check_record(schema, {"items": [paint]}, doc)["items"] == [paint]
    item["properties"]["name"]["maxLength"] = 40  # a bounded string is left as it is
    assert check_record(schema, {"items": got[:1]}, doc)["items"][0]["name"] == "WD-40"
    assert check_record(schema, {"items": [{"name": "40", "price": 5.49}]}, doc)["items"] == [
        {"name": "40", "price": 5.49}
    ]  # not at a cell's start


def test_a_rate_after_the_amount_leaves_a_row():
    """A VAT rate in the last column (``| 578,00 | 23%``): the row's amount is before it."""
    doc = (
        "| Lp. | Nazwa | Ilość | Wartość netto | VAT\n| 1 | Dysk SSD 1 TB | 2 | 578,00 | 23%\n"
        "| 2 | Dojazd do klienta | 1 | 40,00 | 8 %\n| Razem | 618,00\n"
    )
    items = [
        {"description": "Dysk SSD 1 TB", "amount": 578.0},
        {"description": "Dojazd do klienta", "amount": 40.0},
    ]
    assert distinct_row_items(items, DocumentIndex(doc)) == items


def test_a_quantity_that_is_the_lines_amount_is_left_out():
    """An optional number that repeats another of the item's where its row states it once (a
    flat fee's quantity given as its amount) is left out; one the row states twice stays."""
    doc = "Revisions (flat fee) ........ £120.00\nFee 2 x 2.00 ...... £2.00\nTotal  £122.00\n"
    items = [
        {"description": "Revisions (flat fee)", "quantity": 120, "line_total": 120},
        {"description": "Fee", "quantity": 2, "line_total": 2},
    ]
    needed = frozenset({"description", "line_total"})
    assert distinct_row_items(items, DocumentIndex(doc), needed) == [
        {"description": "Revisions (flat fee)", "line_total": 120},
        items[1],
    ]
