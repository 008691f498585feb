"""The drafts ``stencil extract`` lends the engine (``document_proposer``, the engine's proposer
hook): the next row of a table and the text after a label naming the key, read from the
document's index; none where no value opens. Drafts never change the output
(``test_embedded_model_array_record_identical``)."""

from __future__ import annotations

import gc

import pytest

from stencil import SamplingParams, default_model_path
from stencil.constraints import Constraint, DocumentIndex
from stencil.extract.document_proposer import DocumentProposer, label_patterns
from stencil.testing.tiny_models import make_llm

RECEIPT = """BLUE BOTTLE CAFE
Date: 2024-05-17

Cappuccino             4.50
Croissant              3.25
Orange juice           3.80

**Paid by:** card
Total due              11.55
"""
INVOICE = """INVOICE  No. INV-7
Organised by:** Acme Events

Description            Qty     Amount
Cloud hosting (March)    1    1200.00
Extra storage (TB)       2      80.00
"""
SCHEMA = {
    "type": "object",
    "properties": {
        "merchant": {"type": "string"},
        "date": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
                "required": ["name", "price"],
            },
        },
        "paid_by": {"type": "string"},
    },
    "required": ["merchant", "date", "items", "paid_by"],
}


def _texts(document: str, output: str, max_chars: int = 64) -> list[str]:
    return [p.text for p in DocumentProposer(DocumentIndex(document)).propose(output, max_chars)]


@pytest.mark.parametrize(
    ("output", "first"),
    [
        ('{"date":"', "2024-05-17"),
        ('{"paid_by":"', "card"),  # **Paid by:** -> past the markup
        ('{"total":', "11.55"),  # the lexicon's label ``Total due``
        ('{"grand_total":', "11.55"),
        ('{"merchant":"', None),  # no label names it
        ('{"date":"2024', None),  # not at a value's start
    ],
)
def test_the_text_after_a_label_naming_the_key(output, first):
    got = _texts(RECEIPT, output)
    assert (got[0] if got else None) == first


@pytest.mark.parametrize(
    ("key", "first"),
    [
        ("organizer", "Acme Events"),  # past the label's last words: ``Organised by:**``
        ("description", "Cloud hosting (March)"),  # a column's header: the cell below
        ("amount", "1200.00"),  # a right-aligned cell starts left of its header
        ("invoice", "No. INV-7"),  # blanks, then digits: a field on its line, not a header
    ],
)
def test_labels_and_headers(key, first):
    assert _texts(INVOICE, f'{{"{key}":"')[0] == first


def test_proposals_keep_to_max_chars():
    assert _texts(INVOICE, '{"organizer":"', 4) == ["Acme"]


@pytest.mark.parametrize(
    ("key", "matches", "misses"),
    [
        ("due_date", ["Due date:", "due-date", "DUE DATE"], ["date due"]),
        ("organizer", ["Organised by", "organizer"], ["organ"]),
        ("customerEmail", ["customer e-mail", "Email:"], []),
    ],
)
def test_label_patterns(key, matches, misses):
    patterns = label_patterns(key)
    for text in matches:
        assert any(p.search(text) for p in patterns), text
    for text in misses:
        assert not patterns[0].search(text), text


@pytest.mark.parametrize(
    ("output", "draft"),
    [
        ('{"items":[{"name":"Cappuccino","price":4.5},{"name":"', "Croissant"),
        ('{"items":[{"name":"Cappuccino","price":4.5},{"name":"Croissant","price":', "3.25"),
        ('{"items": [{"name": "Cappuccino", "price": 4.5}, {"name": "', "Croissant"),
        ('{"items":[{"name":"Croissant","price":3.25},{"name":"', "Orange juice"),
        ('{"items":[{"name":"', None),  # the key is new: no earlier row
        ('{"items":[{"name":"Orange juice","price":3.8},{"name":"', None),  # no next row
    ],
)
def test_the_next_row_leads(output, draft):
    got = DocumentProposer(DocumentIndex(RECEIPT)).propose(output, 64)
    leads = [p.text for p in got if p.lead]
    assert (leads[0] if leads else None) == draft


def test_embedded_model_array_record_identical():
    """A grounded record with an array of table rows, where the key source and the document's
    proposer (rows, labels) draft: the output with speculation is the output without it, token
    for token."""
    spec = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 1}
    msgs = [{"role": "user", "content": f"Extract the receipt as JSON.\n\n{RECEIPT}"}]
    c = Constraint.json_schema(
        SCHEMA, whitespace="compact", source_text=RECEIPT, ground_strings=True, ground_numbers=True
    )
    lent = DocumentProposer(DocumentIndex(RECEIPT))
    p = SamplingParams(temperature=0, max_tokens=96, constraint=c, proposer=lent)
    plain = make_llm(default_model_path(), max_model_len=512)
    want = plain.chat(msgs, p, use_tqdm=False)[0].outputs[0]
    del plain
    gc.collect()  # one engine of the fp32 model at a time: the test process stays small
    fast = make_llm(default_model_path(), max_model_len=512, speculative_config=spec)
    got = fast.chat(msgs, p, use_tqdm=False)[0].outputs[0]
    assert got.token_ids == want.token_ids
    m = fast.get_metrics()
    assert (
        m["spec_decode_num_accepted_tokens_total"] >= 0.3 * m["spec_decode_num_draft_tokens_total"]
    )
