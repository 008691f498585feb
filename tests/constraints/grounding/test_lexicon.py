"""The lexicon (``lexicon.toml``) and the document index read through it: a field's label concepts
found by the words of its name, and the labels, values and cells one
document states."""

from __future__ import annotations

import re

import pytest

from stencil.constraints import LEXICON, DocumentIndex, dates_in, numbers_in


@pytest.mark.parametrize(
    ("name", "concept"),
    [
        ("total", "total"),
        ("invoiceTotal", "total"),
        ("amount-due", "total"),
        ("Due Date", "due"),
        ("due_on", "due"),
        ("billingAddress", "buyer"),  # camelCase, a word of the buyer's
        ("buyer_address", "buyer"),
        ("billed_party", "buyer"),
        ("invoice_nr", "number"),  # an abbreviation written out
        ("invoice_no", "number"),
        ("issueDate", "issued"),
        ("date_of_birth", "birth"),
        ("salary_min", None),
        ("notes", None),
    ],
)
def test_concepts_by_name(name, concept):
    found = LEXICON.concepts_for(name)
    assert (found[0] if found else None) == concept


def test_every_field_asks_for_concepts_the_lexicon_labels():
    concepts = {c for cs in LEXICON.fields.values() for c in cs}
    assert concepts <= set(LEXICON.labels)
    words = [w for ws in LEXICON.labels.values() for w in ws]
    assert all(w == w.lower().strip() and w for w in words)


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("4. März 2024", "2024-03-04"),
        ("4 de marzo de 2024", "2024-03-04"),
        ("4 sept 2024", "2024-09-04"),  # another spelling
        ("4 aout 2024", "2024-08-04"),  # unaccented
        ("March 4, 2024", "2024-03-04"),
    ],
)
def test_month_names_come_from_the_lexicon(text, iso):
    assert dates_in(text) == [iso]


INVOICE = """Rechnung Nr. 2025-0042          Datum: 04.03.2025
Kunde: Café Morgenrot

Pos  Beschreibung          Betrag
1    Espressomaschine    1.050,00

Gesamtbetrag: 1.249,50 €
"""


def test_the_index_reads_labels_values_and_cells():
    index = DocumentIndex(INVOICE)
    values = {
        c: INVOICE[h.value[0] : h.value[1]].strip(" :") for h in index.labels for c in h.concepts
    }
    assert values["buyer"] == "Café Morgenrot"
    assert values["total"] == "1.249,50 €"
    assert index.labelled(("due", "total"))[0].concepts == {"total"}  # the first printed
    assert index.label_lines == {0, 1, 6}
    assert index.numbers == numbers_in(INVOICE) and index.dates == dates_in(INVOICE)
    assert index.currencies == ["EUR"]
    header = re.search("Beschreibung", INVOICE).start()
    assert index.cell_below(header)[1] == "Espressomaschine"
    amount = re.search("Betrag", INVOICE).start()
    assert index.cell_below(amount)[1] == "1.050,00"  # right-aligned: starts left of its header
