"""Field-by-field extraction's document rules, on small documents: the schema narrowed to what
the document states, values used as often as the document states them, array items from
distinct lines, optional fields left out when the document has no value."""

from __future__ import annotations

import re

import pytest

from stencil.constraints import DocumentIndex
from stencil.extract.questions import field_question, narrow_schema
from stencil.extract.regions import check_record, distinct_row_items
from stencil.extract.schema_library import resolve_schema

INVOICE = resolve_schema("invoice")[1]
DOC_DE = """RECHNUNG Nr. RE-2024-0042
Datum: 04.03.2024

Von: Müller & Söhne GmbH

Beschreibung                Menge       Betrag
Wartung Heizungsanlage          1       400,00
Druckerpatronen                 2       600,00

Gesamtbetrag: 1.190,00 €
"""


def test_narrowed_schema_keeps_what_the_document_states():
    props = narrow_schema(INVOICE, DOC_DE)["properties"]
    assert props["currency"]["enum"] == ["EUR"]  # from the sign, not USD
    assert "pattern" not in props["currency"]
    assert set(props) == set(INVOICE["properties"])  # numbers and dates are stated


@pytest.mark.parametrize(
    ("doc", "enum"),
    [
        ("Kaltmiete: 740,00 €", ["EUR"]),
        ("Rent $1,200 a month (CAD)", ["USD", "CAD"]),
        ("Price: 35 dollars", ["USD", "CAD"]),  # by name
        ("Eintritt: 12 Euro", ["EUR"]),
        ("Rent C$1,200 or US$900", ["USD", "CAD"]),  # each dollar by its country
    ],
)
def test_a_currency_enum_takes_the_currencies_the_document_states(doc, enum):
    schema = {"properties": {"currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "CAD"]}}}
    assert narrow_schema(schema, doc)["properties"]["currency"]["enum"] == enum


@pytest.mark.parametrize(
    ("doc", "asked"),
    [
        ("Vortrag am 04.12.2026, 19 Uhr. Eintritt frei.", False),  # no money at all
        ("BLUE DOOR COFFEE, Boulder CO\nTotal   13.77", True),  # an amount: the model decides
        ("Gesamt 1.190,00", True),
        ("Aluguel: R$ 2.350,00", False),  # a currency the enum lacks: no value of it
        ("Razem: 45,20 zł", False),
        ("Pris: 1 395,00 kr", False),
    ],
)
def test_a_currency_the_document_never_states_is_asked_only_beside_an_amount(doc, asked):
    """With no currency stated, an optional currency is asked (its whole enum) only where the
    document states an amount of money; a required one is always asked."""
    sub = {"type": "string", "enum": ["EUR", "USD"]}
    props = narrow_schema({"properties": {"currency": sub}}, doc)["properties"]
    assert props.get("currency") == (sub if asked else None)
    required = {"properties": {"currency": sub}, "required": ["currency"]}
    assert narrow_schema(required, doc)["properties"]["currency"] == sub


@pytest.mark.parametrize(
    ("doc", "gone"),
    [
        # no amount, no date, no code the invoice number's pattern allows
        (
            "From: Acme Ltd\nNo amount, no date here.",
            {"currency", "issue_date", "due_date", "invoice_number"},
        ),  # fmt: skip
        ("From: Acme Ltd\nTotal: 12.00 on 2024-03-04", {"currency"}),
    ],
)
def test_fields_the_document_cannot_fill_are_left_out(doc, gone):
    props = narrow_schema(INVOICE, doc)["properties"]
    required = set(INVOICE["required"])
    assert set(INVOICE["properties"]) - set(props) == gone
    assert required <= set(props)  # required fields are always asked


def test_shaped_fields_take_only_such_values_the_document_states():
    phone = {"type": "string", "maxLength": 40}
    schema = {"type": "object", "properties": {"iban": {"type": "string"}, "contact_phone": phone}}
    assert narrow_schema(schema, "Card 4417, since 2023, order 77-305")["properties"] == {}
    doc = "Tel. 0171 2233445, IBAN DE89 3704 0044 0532 0130 00"
    props = narrow_schema(schema, doc)["properties"]
    assert props["iban"]["enum"] == [doc[-27:]] and props["contact_phone"]["enum"] == [doc[5:17]]
    doi = {"type": "object", "properties": {"doi": {"type": "string", "description": "10.xxxx/y"}}}
    assert narrow_schema(doi, "doi.org/10.1007/s44295-026-00127-3.")["properties"]["doi"][
        "enum"
    ] == ["10.1007/s44295-026-00127-3"]


@pytest.mark.parametrize(
    ("doc", "enum"),
    [
        ("Wir zahlen 15,50 € brutto pro Stunde.", None),  # an hourly wage only: not asked
        ("Ayuda de 600 euros al mes, 12 % de pensión, 37 horas a la semana.", None),
        ("Stundenlohn: 14 €; ab 2027 Tarif", [2027]),  # the label names the hour
        ("£38,000 to £44,000 per year, 25 days' leave, from 9.50 an hour", [38000, 44000, 25]),
        ("Gehalt 52.000 € (brutto im Jahr)", "asked whole"),  # nothing in another unit
    ],
)
def test_a_number_field_that_names_its_unit_takes_no_number_in_another(doc, enum):
    """A field named or described for a period, an area or a share never takes a number the
    document states per another period, in another area unit or as a share."""
    sub = {"type": "number", "description": "Lower end of the yearly salary range"}
    props = narrow_schema({"properties": {"salary_min": sub}}, doc)["properties"]
    assert props.get("salary_min") == (
        None if enum is None else sub if enum == "asked whole" else {**sub, "enum": enum}
    )
    free = {"type": "number", "description": "Amount"}  # names no unit: every number
    assert narrow_schema({"properties": {"x": free}}, doc)["properties"]["x"] == free


def test_an_area_in_square_feet_is_no_size_in_square_metres():
    schema = {"properties": {"size_sqm": {"type": "integer"}, "rent": {"type": "number"}}}
    doc = "Studio, 850 sq ft, $1,950 per month, built 1998"
    props = narrow_schema(schema, doc)["properties"]
    assert props["size_sqm"] == {"type": "integer", "enum": [1998]}  # no rent per month
    assert props["rent"] == {"type": "number"}


@pytest.mark.parametrize(
    ("key", "value", "takes"),
    [
        ("order_id", "BK-558213", True),
        ("invoiceNo", "812 345 678 00021", True),  # parts with a digit each
        ("reference", "Derek Holloway", False),  # no digit: no code
        ("invoice_no", "Rechnung 2024", False),  # a label's word before the code
        ("order_id", "2026/7", True),
        ("order_id", "4471", True),
        ("order_id", "14.99", False),  # an amount
        ("order_id", "$14.99", False),
        ("order_id", "20", False),  # a house number, a count
        ("order_id", "20%", False),
        ("order_id", "19:04", False),  # a time
        ("order_id", "[19:04]", False),
        ("order_id", "22, 7412", False),  # a sentence's comma
        ("order_id", "a.b4@mail.com", False),  # an e-mail
    ],
)
def test_a_code_field_takes_a_span_with_a_digit_in_each_part_and_no_amount(key, value, takes):
    schema = {"type": "object", "properties": {key: {"type": "string"}}}
    sub = narrow_schema(schema, f"Ref: {value}, form B-7.")["properties"][key]
    assert (re.search(sub["pattern"], value) is not None) == takes
    assert narrow_schema(schema, "No code in these words.")["properties"] == {}
    currency = {"type": "object", "properties": {"currency_code": {"type": "string"}}}
    assert narrow_schema(currency, "Total 12,00 €")["properties"]["currency_code"]["enum"] == [
        "EUR"
    ]


def test_field_question_answers_one_key():
    q = field_question("total", INVOICE["properties"]["total"], required=True)
    assert q.schema["properties"].keys() == {"total"} and q.schema["required"] == ["total"]
    assert "total" in q.text and "final total" in q.text
    assert "required" not in field_question("buyer", {"type": "string"}, False).schema


def test_only_a_list_of_strings_is_asked_with_a_frequency_penalty():
    names = {"type": "array", "items": {"type": "string"}}
    assert field_question("names", names, False).frequency_penalty > 0
    assert (
        field_question("lines", INVOICE["properties"]["line_items"], False).frequency_penalty == 0
    )  # keys repeat per item
    assert field_question("total", INVOICE["properties"]["total"], True).frequency_penalty == 0


def test_array_items_come_from_distinct_lines():
    items = [
        {"description": "Wartung Heizungsanlage", "quantity": 1, "amount": 400.0},
        {"description": "Wartung Heizungsanlage", "quantity": 1, "amount": 400.0},  # repeated
        {"description": "Müller & Söhne GmbH", "amount": 11.0},  # not a row of the document
        {"description": "Druckerpatronen", "quantity": 2, "amount": 600.0},
        {"description": "Druckerpatronen", "amount": 1190.0},  # words and number on two lines
    ]
    assert distinct_row_items(items, DocumentIndex(DOC_DE)) == [items[0], items[3]]
    twice = DOC_DE + "Wartung Heizungsanlage          1       400,00\n"
    assert (
        distinct_row_items(items[:2], DocumentIndex(twice)) == items[:2]
    )  # the document repeats it


def test_check_record_leaves_out_values_without_a_letter_or_digit():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name"],
    }
    document = "Anna Weber - Berlin / 2024"
    data = {"name": "-", "note": "/", "tags": ["Berlin", "-", "2024"]}
    assert check_record(schema, data, document) == {"name": "-", "tags": ["Berlin", "2024"]}


def test_check_record_leaves_out_doubled_optional_values_and_empty_arrays():
    data = {
        "seller": "Müller & Söhne GmbH",
        "buyer": "Müller & Söhne GmbH",  # the document names it once: the seller's
        "issue_date": "2024-03-04",
        "due_date": "2024-03-04",  # stated once: the issue date's
        "line_items": [{"description": "Datum", "amount": 4.0}],
        "total": 1190.0,
    }
    assert check_record(INVOICE, data, DOC_DE) == {
        "seller": "Müller & Söhne GmbH",
        "issue_date": "2024-03-04",
        "total": 1190.0,
    }
