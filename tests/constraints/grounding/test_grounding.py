"""Grounded JSON: every grounded string value is a verbatim span of the source text (compared
after JSON decoding), everything else keeps its schema; checked with jsonschema on random walks
over random documents (Unicode, quotes, backslashes, control characters that JSON escapes)."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest
from constraint_helpers import accepts_text, random_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stencil.constraints import Constraint, ConstraintError, translate
from stencil.constraints.errors import UnsupportedSchemaError
from stencil.constraints.grounding.marking import mark_grounded
from stencil.constraints.grounding.soft_breaks import soft_breaks
from stencil.constraints.grounding.stated import dates_in, numbers_in

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
INVOICE = """INVOICE  No. INV-2024-0193
From: Acme Cloud Services Ltd.
Bill to: "Globex" Corporation \\ Dept. Zürich 東京
Total due (USD): 1,580.00
"""
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "x-grounded": True},
        "nick": {"anyOf": [{"type": "string", "x-grounded": True}, {"type": "null"}]},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string", "x-grounded": True}, "maxItems": 3},
        "note": {"type": "string", "maxLength": 5},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "x-grounded": True, "maxLength": 40},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
            },
            "required": ["label"],
        }
    },
    "$ref": "#/$defs/node",
}
PIECES = [*'abc XYZ"\\\n\t.,:-é東😀\x01', "Ada", "Lovelace", "1,580.00"]
# a value neither starts with a separator that closes or follows something nor ends with one
# that opens or precedes something
NO_START, NO_END = ",;:)]}»”", ",;:([{«“"
DOC_TEXT = (
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=30)
    .map("".join)
    .filter(lambda doc: re.search(r"[^\s,:]", doc))
)


def grounded_values(value, schema, root):
    """Every value at a grounded position of ``schema`` (follows $ref, anyOf, items, properties)."""
    if isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    if not isinstance(schema, dict):
        return
    if schema.get("x-grounded") and isinstance(value, str):
        yield value
    for sub in schema.get("anyOf", ()):
        yield from grounded_values(value, sub, root)
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                yield from grounded_values(value[key], sub, root)
    if isinstance(value, list) and "items" in schema:
        for item in value:
            yield from grounded_values(item, schema["items"], root)


def check_walks(compiler, schema, source, seed, n=3):
    compiled = compiler.compile(Constraint.json_schema(schema, source_text=source))
    rng = random.Random(seed)
    done = 0
    for _ in range(n):
        raw, ended = random_walk(compiled, rng, max_tokens=120)
        if not ended:
            continue
        done += 1
        value = json.loads(raw.decode("utf-8"))
        jsonschema.validate(value, schema)
        for text in grounded_values(value, schema, schema):
            assert text and text in source, (text, source)
            assert text == text.strip(), text
            assert text[0] not in NO_START and text[-1] not in NO_END, text
    return done


@pytest.mark.parametrize("schema", [PERSON, TREE], ids=["person", "tree"])
@SETTINGS
@given(doc=DOC_TEXT, seed=st.integers(0, 2**32 - 1))
def test_walks_over_random_documents_stay_in_the_document(smol_compiler, schema, doc, seed):
    check_walks(smol_compiler, schema, doc, seed)


def test_walks_over_an_invoice_finish_and_stay_grounded(smol_compiler):
    assert check_walks(smol_compiler, PERSON, INVOICE, seed=7, n=12) >= 3


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('{"name": "Acme Cloud Services Ltd.", "age": 3}', True),
        ('{"name": "\\"Globex\\" Corporation \\\\ Dept. Zürich 東京", "age": 3}', True),
        ('{"name": "Acme Cloud Services Ltd.\\nBill", "age": 3}', True),
        ('{"name": "Acme Cloud Services Inc.", "age": 3}', False),  # not in the document
        ('{"name": "cme Cloud", "age": 3}', False),  # starts inside a word
        ('{"name": " Acme", "age": 3}', False),  # starts at whitespace
        ('{"name": "Acme", "age": 3, "note": "free!"}', True),  # not grounded
        ('{"name": "Acme", "nick": null, "age": 3, "tags": ["INV-2024-0193", "Ltd"]}', True),
        ('{"name": "Acme", "age": 3, "tags": ["Ltd", "Inc"]}', False),
    ],
)
def test_spans_are_accepted_and_inventions_refused(smol_compiler, smol_tokenizer, text, ok):
    compiled = smol_compiler.compile(Constraint.json_schema(PERSON, source_text=INVOICE))
    assert accepts_text(compiled, smol_tokenizer, text) is ok


FRONT_MATTER = (
    "Ana Huamán¹, Peter Lindqvist²\n¹ Universidad Católica\n² Uppsala University (85 m²)\n"
    "https://doi.org/10.18653/v1/2025.cllrl-1.11 · doi:10.1007/s44295-026-00127-3\n"
    "Invoice INV-2024-0193 of 12/03/2024"
)
NAME = {"type": "object", "properties": {"v": {"type": "string", "x-grounded": True}}}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("Ana Huamán", True),  # a name without its footnote mark
        ("Ana Huamán¹", True),  # or with it, as the document writes it
        ("Peter Lindqvist", True),
        ("Universidad Católica", True),
        ("¹ Universidad Católica", False),  # a value never starts with a footnote mark
        ("85 m²", True),
        ("Huam", False),  # still never inside a word
        ("10.18653/v1/2025.cllrl-1.11", True),  # a DOI apart from the URL it is in
        ("https://doi.org/10.18653/v1/2025.cllrl-1.11", True),
        ("10.1007/s44295-026-00127-3", True),  # apart from its doi: prefix
        ("v1/2025.cllrl-1.11", False),  # never inside a code with digits
        ("2024-0193", False),
        ("03/2024", False),
    ],
)
def test_the_units_a_grounded_value_is_made_of(smol_compiler, smol_tokenizer, value, ok):
    compiled = smol_compiler.compile(Constraint.json_schema(NAME, source_text=FRONT_MATTER))
    text = json.dumps({"v": value}, ensure_ascii=False)
    assert accepts_text(compiled, smol_tokenizer, text) is ok


def test_ground_strings_grounds_plain_and_pattern_strings(smol_compiler, smol_tokenizer):
    schema = {
        "type": "object",
        "properties": {
            "seller": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        },
        "required": ["seller", "date", "code"],
    }
    c = Constraint.json_schema(schema, source_text=INVOICE, ground_strings=True)
    compiled = smol_compiler.compile(c)
    good = '{"seller": "Acme Cloud Services Ltd.", "date": "2031-01-02", "code": "USD"}'
    assert accepts_text(compiled, smol_tokenizer, good)  # a date is ground_dates' to ground
    for bad in ('{"seller": "Initech", "date": "2031-01-02", "code": "USD"}',
                '{"seller": "Acme", "date": "2031-01-02", "code": "EUR"}'):  # fmt: skip
        assert not accepts_text(compiled, smol_tokenizer, bad), bad


TIME = {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}


@pytest.mark.parametrize(
    ("doc", "allowed"),
    [
        ("Einladung: am 4. März um 9.15 Uhr in Saal 20, Ende 11:30.", ["09:15", "11:30"]),
        ("Rendez-vous à 15h30, salle 20:15B.", ["15:30"]),  # 20:15B is a room, no time
        ("Doors open at 7 pm; talk 19:30-21:00.", ["19:00", "19:30", "21:00"]),
        ("Dec 1, 2026 · 11:48 PM", ["23:48"]),  # the reading, never the span 11:48
    ],
)
def test_a_pattern_string_takes_a_time_the_document_states(
    smol_compiler, smol_tokenizer, doc, allowed
):
    schema = {"type": "object", "properties": {"start": TIME}, "required": ["start"]}
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    )
    for value in (
        "09:15",
        "11:30",
        "15:30",
        "19:00",
        "19:30",
        "20:15",
        "21:00",
        "07:00",
        "11:48",
        "23:48",
    ):
        ok = value in allowed
        assert accepts_text(compiled, smol_tokenizer, json.dumps({"start": value})) is ok, value


def test_a_code_pattern_takes_no_normalized_date(smol_compiler, smol_tokenizer):
    code = {"type": "string", "pattern": "^[A-Za-z0-9/#-]*[0-9][A-Za-z0-9/#-]*$"}
    schema = {"type": "object", "properties": {"number": code}, "required": ["number"]}
    doc = "Rechnung Nr. 2025-0042 vom 03.02.2025"
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    )
    assert accepts_text(compiled, smol_tokenizer, '{"number": "2025-0042"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"number": "2025-02-03"}')


def test_formats_with_span_regexes_are_grounded(smol_compiler, smol_tokenizer):
    schema = {"type": "object", "properties": {"site": {"type": "string", "format": "uri"}}}
    doc = "Details: https://example.org/jobs/42 or call us."
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    )
    assert accepts_text(compiled, smol_tokenizer, '{"site": "https://example.org/jobs/42"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"site": "https://example.com/"}')


PAYMENT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string", "format": "email"},
        "paid": {"type": "string", "format": "date"},
        "amount": {"type": "number"},
        "code": {"type": "integer"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
LETTER = "On 2024-03-05 Ada Lovelace (ada.lovelace@example.com) paid 1,580.00 for order 7 of 12."


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("Ada Lovelace", True),
        ("order 7 of 12", True),  # integers are nobody's claim: the sibling is an integer
        ("ada.lovelace@example.com", False),  # the email's sibling claims addresses
        ("Ada Lovelace (ada.lovelace@example.com)", False),  # ... inside a span too
        ("ada.lovelace", False),  # an address is one unit: no part of it
        ("2024-03-05", False),  # the date's sibling claims dates
        ("2024-03", False),  # a number with separators is one unit
        ("paid 1,580.00", False),  # the number's sibling claims decimal numbers
        ("1,580", False),
    ],
)
def test_plain_strings_skip_units_and_what_siblings_claim(smol_compiler, smol_tokenizer, name, ok):
    c = Constraint.json_schema(PAYMENT, source_text=LETTER, ground_strings=True)
    text = json.dumps({"name": name})
    assert accepts_text(smol_compiler.compile(c), smol_tokenizer, text) is ok


def test_the_email_field_itself_takes_the_whole_address(smol_compiler, smol_tokenizer):
    c = Constraint.json_schema(PAYMENT, source_text=LETTER, ground_strings=True)
    compiled = smol_compiler.compile(c)
    good = '{"name": "Ada Lovelace", "email": "ada.lovelace@example.com", "paid": "2024-03-05"}'
    assert accepts_text(compiled, smol_tokenizer, good)
    assert not accepts_text(
        compiled, smol_tokenizer, '{"name": "Ada", "email": "lovelace@example.com"}'
    )


def test_the_source_is_part_of_the_cache_key():
    a = Constraint.json_schema(PERSON, source_text="Ada Lovelace")
    b = Constraint.json_schema(PERSON, source_text="Grace Hopper")
    assert a.key != b.key


def test_grounded_constraints_translate_in_the_compile(smol_compiler, smol_tokenizer):
    c = Constraint.json_schema(PERSON, source_text=INVOICE)
    compiled = smol_compiler.compile(c)
    assert accepts_text(compiled, smol_tokenizer, '{"name": "Globex", "age": 1}')
    assert not accepts_text(compiled, smol_tokenizer, '{"name": "Initech", "age": 1}')


@pytest.mark.parametrize(
    ("schema", "kwargs", "error"),
    [
        (PERSON, {}, "no source text"),
        (PERSON, {"source_text": 3}, "source text"),
        ({"type": "integer", "x-grounded": True}, {"source_text": "1"}, "string"),
        ({"type": "string", "x-grounded": "yes"}, {"source_text": "1"}, "true or false"),
        (
            {"type": "object", "patternProperties": {"^a": {"type": "string", "x-grounded": True}}},
            {"source_text": "abc"},
            "x-grounded",
        ),
    ],
)
def test_bad_grounding_is_a_constraint_error(schema, kwargs, error):
    with pytest.raises(ConstraintError, match=error):
        translate(Constraint.json_schema(schema, **kwargs))


def test_unsupported_position_names_the_pointer():
    schema = {"type": "object", "patternProperties": {"^a": {"type": "string", "x-grounded": True}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        translate(Constraint.json_schema(schema, source_text="abc"))
    assert info.value.keyword == "x-grounded"


def test_grounded_emails_are_spans_and_emails(smol_compiler, smol_tokenizer):
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}},
        "required": ["email"],
    }
    doc = "Write to ada.lovelace@example.com or to the Acme desk."
    c = Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    compiled = smol_compiler.compile(c)
    assert accepts_text(compiled, smol_tokenizer, '{"email": "ada.lovelace@example.com"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"email": "bob@example.com"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"email": "Acme"}')  # a span, no email


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Total due (USD): 1,580.00", [1580.0]),
        ("INV-2024-0193 issued 2024-03-04", []),  # parts of codes and dates are not
        ("opublikowano 7 kwietnia 2026: 7 500 zł", [2026.0, 7500.0, 7.0, 500.0]),  # a day: no
        ("qty 2, -5 left, v1.2.3, $300.00.", [2.0, -5.0, 300.0]),
        ("no digits", []),
    ],
)
def test_numbers_in(text, numbers):
    assert numbers_in(text) == numbers


def test_a_grounded_number_may_take_a_number_its_description_states():
    """``0 if free``: the user's schema defines the value; the document need not state it."""
    price = {"type": "number", "description": "Price of one ticket; 0 if free"}
    schema = {"type": "object", "properties": {"price": price, "seats": {"type": "integer"}}}
    marked, _ = mark_grounded(schema, ground_strings=False, numbers=[12.0, 19.3])
    assert marked["properties"]["price"]["enum"] == [12.0, 19.3, 0.0]
    assert marked["properties"]["seats"]["enum"] == [12]


def test_grounded_numbers_come_from_the_document(smol_compiler):
    schema = {
        "type": "object",
        "properties": {"total": {"type": "number"}, "qty": {"type": "integer", "maximum": 5}},
        "required": ["total", "qty"],
    }
    doc = "Total due: 1,580.00 for 2 items (3.5 kg), order 77."
    c = Constraint.json_schema(schema, source_text=doc, ground_numbers=True)
    compiled = smol_compiler.compile(c)
    rng = random.Random(3)
    seen = 0
    for _ in range(6):
        raw, ended = random_walk(compiled, rng, max_tokens=40)
        if ended:
            value = json.loads(raw)
            assert value["total"] in (1580.0, 2, 3.5, 77), value
            assert value["qty"] == 2, value  # the integers of the document within the maximum
            seen += 1
    assert seen


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("Issue date: 2024-03-04   Due date: 2024-04-03", ["2024-03-04", "2024-04-03"]),
        (
            "paid March 4, 2024; refund 5 Sept. 2023, 2024/3/7",
            ["2024-03-04", "2023-09-05", "2024-03-07"],
        ),
        ("INV-2024-0193, v1.2.3, build 2024-13-45, Mayday 12 2024", []),  # no calendar date
        # day and month order unknown: both readings, never free
        ("due 2024-03-05, signed 03/04/2024", ["2024-03-05", "2024-04-03", "2024-03-04"]),
    ],
)
def test_dates_in(text, dates):
    assert dates_in(text) == dates


@pytest.mark.parametrize(
    ("doc", "allowed"),
    [
        ("Paid on 4 March 2024, due April 3, 2024.", ["2024-03-04", "2024-04-03"]),
        ("Paid in spring.", None),  # no date stated: the format alone
    ],
)
def test_grounded_dates_come_from_the_document(smol_compiler, smol_tokenizer, doc, allowed):
    schema = {"type": "object", "properties": {"paid": {"type": "string", "format": "date"}}}
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, source_text=doc, ground_dates=True)
    )
    for day in ("2024-03-04", "2024-04-03", "2031-01-02"):
        ok = allowed is None or day in allowed
        assert accepts_text(compiled, smol_tokenizer, json.dumps({"paid": day})) is ok, day
    assert not accepts_text(compiled, smol_tokenizer, '{"paid": "4 March 2024"}')


@pytest.mark.parametrize(
    ("pattern", "value", "ok"),
    [
        ("^[A-Z0-9-]*[0-9][A-Z0-9-]*$", "INV-2024-0193", True),
        ("^[A-Z0-9-]*[0-9][A-Z0-9-]*$", "INVOICE", False),  # a span, not the pattern
        ("^[A-Z0-9-]*[0-9][A-Z0-9-]*$", "INV-2025-0001", False),  # the pattern, not a span
        ("\\d", "No. INV-2024-0193", True),  # a pattern is a search: unanchored
        ("^Acme|Corporation$", '\\"Globex\\" Corporation', True),  # either anchored branch
        ("^Acme|Corporation$", "Acme Cloud", True),
        ("^Acme|Corporation$", "Cloud Services", False),
    ],
)
def test_a_grounded_string_keeps_its_pattern(smol_compiler, smol_tokenizer, pattern, value, ok):
    schema = {"type": "object", "properties": {"v": {"type": "string", "x-grounded": True}}}
    schema["properties"]["v"]["pattern"] = pattern
    compiled = smol_compiler.compile(Constraint.json_schema(schema, source_text=INVOICE))
    assert accepts_text(compiled, smol_tokenizer, f'{{"v": "{value}"}}') is ok


def test_a_pattern_no_span_matches_leaves_out_an_optional_property(smol_compiler, smol_tokenizer):
    code = {"type": "string", "x-grounded": True, "pattern": "[0-9]", "maxLength": 40}
    schema = {
        "type": "object",
        "properties": {"code": code, "name": {"type": "string", "x-grounded": True}},
        "required": ["name"],
        "additionalProperties": False,
    }
    doc = "Ada Lovelace wrote the notes."  # no digit anywhere
    compiled = smol_compiler.compile(Constraint.json_schema(schema, source_text=doc))
    assert accepts_text(compiled, smol_tokenizer, '{"name": "Ada Lovelace"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"code": "Ada", "name": "Ada"}')
    with pytest.raises(ConstraintError, match="cannot be filled"):
        translate(Constraint.json_schema({**schema, "required": ["code"]}, source_text=doc))


@pytest.mark.parametrize(
    "kind",
    [{"format": f} for f in ("email", "uri", "uuid", "ipv4")]
    + [{"pattern": "^[A-Z]{2}[0-9]{2}$"}, {"pattern": "^[0-9]{5}$"}]  # no span bounded so
    + [{"pattern": "^[A-Z]+[0-9]+$"}],  # unbounded: the spans up to 256 characters are tried
)
def test_a_format_no_span_holds_leaves_out_an_optional_property(
    smol_compiler, smol_tokenizer, kind
):
    """A document stating no value of a format or pattern: the optional property is left out,
    so no walk opens it and meets a dead end (llguidance finds an empty span lexeme only once
    inside it: "NoExtensionBias")."""
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", **kind}},
        "additionalProperties": False,
    }
    doc = "Revue de sociologie, vol. 66, 2025 - DOI : 10.3917/rfs.662.0245 (Paris)"
    constraint = Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    compiled = smol_compiler.compile(constraint)
    assert accepts_text(compiled, smol_tokenizer, "{}")
    rng = random.Random(str(kind))
    assert all(random_walk(compiled, rng)[1] for _ in range(8))
    with pytest.raises(ConstraintError, match="cannot be filled"):
        translate(
            Constraint.json_schema(
                {**schema, "required": ["v"]}, source_text=doc, ground_strings=True
            )
        )


def test_claimed_kinds_of_fields_asked_apart(smol_compiler, smol_tokenizer):
    """``x-claimed``: an object claims kinds for the properties asked in other questions."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "x-claimed": ["email"],
        "additionalProperties": False,
    }
    doc = "kwame.asante@icloud.com\nKWAME ASANTE, Toronto"
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    )
    assert accepts_text(compiled, smol_tokenizer, '{"name": "KWAME ASANTE"}')
    assert not accepts_text(compiled, smol_tokenizer, '{"name": "kwame.asante@icloud.com"}')


@pytest.mark.parametrize("sibling", [None, {"type": "string", "format": "date"}])
def test_a_date_in_words_is_claimed_by_a_date_sibling(smol_compiler, smol_tokenizer, sibling):
    props = {"ref": {"type": "string"}, **({"due": sibling} if sibling else {})}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    doc = "Ref: AB 17, due Nov 15, 2026 at the latest (or 4. März 2027)."
    constraint = Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    compiled = smol_compiler.compile(constraint)
    assert accepts_text(compiled, smol_tokenizer, '{"ref": "AB 17"}')
    for date in ("Nov 15, 2026", "15, 2026", "4. März 2027"):
        assert accepts_text(compiled, smol_tokenizer, f'{{"ref": "{date}"}}') is (sibling is None)


def test_a_date_sibling_claims_dates_not_date_shaped_codes(smol_compiler, smol_tokenizer):
    """A code whose digits look like a date (``112/03/2026``: no day 112) stays a span; the
    document's real dates, in digits too, stay claimed."""
    props = {"number": {"type": "string"}, "issued": {"type": "string", "format": "date"}}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    doc = "Faktura VAT nr FV/112/03/2026\nData wystawienia: 12.03.2026 (2026-03-12)"
    constraint = Constraint.json_schema(schema, source_text=doc, ground_strings=True)
    compiled = smol_compiler.compile(constraint)
    assert accepts_text(compiled, smol_tokenizer, '{"number": "FV/112/03/2026"}')
    for date in ("12.03.2026", "2026-03-12"):
        assert not accepts_text(compiled, smol_tokenizer, f'{{"number": "{date}"}}')


WRAPPED = (
    "Vliv městského tepelného ostrova na spotřebu energie\n"
    "na chlazení bytových domů v Brně\n"
    "\n"
    "Ich arbeite seit 2020 als Empfangsleiterin im Hotel Bayerischer\n"
    "Hof in München, davor zwei Jahre lang am Empfang  \n"
    "   und Buchhaltung eines Hotels in der Stadt Regensburg,\n"
    "tel. 030 123\n"
    "angielski – poziom B2 (FCE, 2015)\n"
    "niemiecki – poziom A2\n"
    "Summer fair\n"
    "in the park\n"
)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("Vliv městského tepelného ostrova na spotřebu energie na chlazení bytových domů", True),
        ("Vliv městského tepelného ostrova na spotřebu energie\nna chlazení", False),
        ("Empfang und Buchhaltung", True),  # the blanks around a soft break are one space
        ("Hotel Bayerischer Hof", False),  # before a capital: the line may end a value
        ("Hotel Bayerischer\nHof", True),
        ("Regensburg, tel", False),  # before an abbreviation
        ("2015) niemiecki", False),  # after a bracket
        ("Summer fair in the park", False),  # after a short line
    ],
)
def test_a_value_goes_on_across_a_soft_line_break(smol_compiler, smol_tokenizer, value, ok):
    compiled = smol_compiler.compile(Constraint.json_schema(NAME, source_text=WRAPPED))
    text = json.dumps({"v": value}, ensure_ascii=False)
    assert accepts_text(compiled, smol_tokenizer, text) is ok


def test_soft_breaks_are_inside_running_text():
    assert [WRAPPED[s:e] for s, e in soft_breaks(WRAPPED)] == ["\n", "  \n   "]
