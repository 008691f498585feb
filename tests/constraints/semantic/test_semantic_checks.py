"""Decode-time checks: seeded walks over schemas using each keyword a grammar cannot state
exactly end valid (jsonschema, with format checking) or in the matcher's error state; the
matcher refuses what completes an invalid value, and jump-forward / EOS respect the checks."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from constraint_helpers import accepts_text, walk

from stencil.constraints import Constraint, allocate_token_bitmask, bitmask_to_bool, translate

SCHEMAS = {
    "uniqueItems strings": {
        "type": "array",
        "items": {"type": "string", "maxLength": 2},
        "uniqueItems": True,
        "maxItems": 6,
    },
    "uniqueItems integers": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    "uniqueItems objects": {
        "type": "array",
        "uniqueItems": True,
        "maxItems": 4,
        "items": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
    },
    "uniqueItems finite": {"type": "array", "items": {"enum": ["x", "y", 3]}, "uniqueItems": True},
    "oneOf overlapping": {
        "oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]
    },
    "if/then/else": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
        "if": {"properties": {"a": {"minimum": 5}}},
        "then": {"required": ["b"]},
        "else": {"properties": {"b": {"maxLength": 2}}},
    },
    "if const (rewrite)": {
        "type": "object",
        "required": ["k", "v"],
        "properties": {"k": {"enum": ["x", "y"]}, "v": {"type": "integer"}},
        "if": {"properties": {"k": {"const": "x"}}},
        "then": {"properties": {"v": {"maximum": 3}}},
        "else": {"properties": {"v": {"minimum": 100}}},
    },
    "not": {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 4,
        "not": {"items": {"minimum": 3}},
    },
    "contains": {
        "type": "array",
        "items": {"type": "integer"},
        "contains": {"minimum": 50},
        "minContains": 1,
        "maxContains": 2,
        "maxItems": 5,
    },
    "maxProperties open": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
        "maxProperties": 2,
    },
    "propertyNames": {
        "type": "object",
        "propertyNames": {"maxLength": 2},
        "additionalProperties": {"type": "integer"},
    },
    "look-ahead pattern": {"type": "string", "pattern": "^(?!ab)[a-c]{2,4}$"},
    "formats": {
        "type": "object",
        "required": ["r", "u"],
        "properties": {
            "r": {"type": "string", "format": "uri-template", "maxLength": 6},
            "u": {"type": "string", "format": "uuid4"},
        },
    },
    "recursive $ref with siblings": {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "next": {"$ref": "#", "required": ["v"]}},
        "maxProperties": 2,
    },
    "unevaluatedProperties": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "anyOf": [{"properties": {"b": {"type": "boolean"}}}],
        "unevaluatedProperties": False,
    },
}


@pytest.fixture(scope="module")
def compiled(qwen_compiler):
    exact = {"allow_undeclared_properties": True}  # exact JSON Schema semantics
    return {
        k: qwen_compiler.compile(Constraint.json_schema(s, **exact)) for k, s in SCHEMAS.items()
    }


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_walks_end_valid_or_in_error(compiled, name):
    schema = SCHEMAS[name]
    oracle = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    rng = random.Random(sum(map(ord, name)))
    outcomes = [walk(compiled[name], rng, max_tokens=100) for _ in range(12)]
    for w in outcomes:
        if w.outcome == "done":
            oracle.validate(json.loads(w.text))
        elif w.outcome == "error":
            assert "decode-time check" in w.error
    assert any(w.outcome == "done" for w in outcomes), name


def test_keywords_are_checked_not_refused():
    for name, schema in SCHEMAS.items():
        c = translate(Constraint.json_schema(schema))
        assert c.checks or "rewrite" in name or "finite" in name, name


CASES = [  # (schema key, text, valid per jsonschema)
    ("uniqueItems strings", '["a", "b", "a"]', False),
    ("uniqueItems strings", '["a", "b"]', True),
    ("uniqueItems integers", "[1, 2, 1.0]", False),
    ("uniqueItems objects", '[{"a": true}, {"a": true}]', False),
    ("uniqueItems finite", '["x", 3, "y"]', True),
    ("uniqueItems finite", '["x", 3, "x"]', False),
    ("oneOf overlapping", "6", False),
    ("oneOf overlapping", "9", True),
    ("if/then/else", '{"a": 7}', False),
    ("if/then/else", '{"a": 1, "b": "xyz"}', False),
    ("if/then/else", '{"a": 7, "b": "xyz"}', True),
    ("not", "[3, 4]", False),
    ("contains", "[1, 2]", False),
    ("contains", "[50, 60, 70]", False),
    ("contains", "[1, 60]", True),
    ("maxProperties open", '{"a": 1, "x": true, "y": false}', False),
    ("propertyNames", '{"abc": 1}', False),
    ("look-ahead pattern", '"abc"', False),
    ("look-ahead pattern", '"bca"', True),
    ("formats", '{"r": "{a b}", "u": "123e4567-e89b-42d3-a456-426614174000"}', False),
    ("recursive $ref with siblings", '{"v": 1, "next": {"next": {"v": 2}}}', False),
    ("recursive $ref with siblings", '{"v": 1, "next": {"v": 2}}', True),
    ("unevaluatedProperties", '{"a": 1, "c": 2}', False),
    ("unevaluatedProperties", '{"a": 1, "b": true}', True),
]


@pytest.mark.parametrize(("name", "text", "valid"), CASES)
def test_accepts_exactly_what_jsonschema_accepts(compiled, qwen_tokenizer, name, text, valid):
    schema = SCHEMAS[name]
    oracle = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    assert oracle.is_valid(json.loads(text)) is valid
    assert accepts_text(compiled[name], qwen_tokenizer, text) is valid


def test_duplicate_item_is_refused_and_state_kept(compiled, qwen_tokenizer):
    m = compiled["uniqueItems strings"].new_matcher()
    for t in qwen_tokenizer.encode('["a", "'):
        assert m.accept_token(t)
    quote_a = qwen_tokenizer.encode("a")[0]
    assert m.accept_token(quote_a)
    closing = qwen_tokenizer.encode('"')[0]
    assert not m.accept_token(closing)  # completes a second "a"
    m.rollback(1)
    assert m.accept_token(qwen_tokenizer.encode("b")[0]) and m.accept_token(closing)


def test_jump_forward_and_eos_respect_the_checks(qwen_compiler, qwen_tokenizer):
    schema = {
        "type": "array",
        "items": {"const": "x"},
        "uniqueItems": True,
        "minItems": 1,
        "maxItems": 2,
        "prefixItems": [{"const": "x"}],
    }  # "x" forced, never twice
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    m = compiled.new_matcher()
    for t in qwen_tokenizer.encode('["x", '):
        m.accept_token(t)
    forced = m.jump_forward_tokens()
    assert qwen_tokenizer.decode(forced).count('"') < 2  # would complete a second "x"
    eos = compiled.vocab.eos_token_ids[0]
    assert not m.is_accepting() and not m.accept_token(eos)


def test_exhausted_matcher_reports_the_keyword(qwen_compiler, qwen_tokenizer):
    """``[9, 9`` with items 0..9 can only complete a duplicate: empty mask, clear error."""
    schema = {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 9},
        "uniqueItems": True,
    }
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    m = compiled.new_matcher()
    for t in qwen_tokenizer.encode("[9, 9"):
        assert m.accept_token(t)
    mask = allocate_token_bitmask(1, compiled.vocab.vocab_size)
    m.fill_next_token_bitmask(mask, 0)
    assert not bitmask_to_bool(mask, compiled.vocab.vocab_size)[0].any()
    assert "uniqueItems" in m.error() and "decode-time check" in m.error()
    assert not m.accept_token(qwen_tokenizer.encode("]")[0])
    m.rollback(1)  # back before the second 9: other items are open again
    assert m.error() is None
    m.fill_next_token_bitmask(mask, 0)
    assert bitmask_to_bool(mask, compiled.vocab.vocab_size)[0].any()


PROBES = ['"', "}", "]", ",", ":", "{", "[", '",', '"}', "},", "}]", "]}", "1", "a", "true", " "]


@pytest.mark.parametrize(("name", "text"), [(n, t) for n, t, valid in CASES if valid])
def test_a_token_is_accepted_exactly_when_the_mask_allows_it(compiled, qwen_tokenizer, name, text):
    """Along a valid text, structural tokens (what the close_on_length search tries, most of
    them off the mask) are accepted exactly when the mask allows them, refused without
    raising otherwise, and a refusal leaves the state as it was."""
    probes = [qwen_tokenizer.encode(p)[0] for p in PROBES if len(qwen_tokenizer.encode(p)) == 1]
    vocab = compiled[name].vocab
    m = compiled[name].new_matcher()
    for token in qwen_tokenizer.encode(text):
        mask = allocate_token_bitmask(1, vocab.vocab_size)
        m.fill_next_token_bitmask(mask, 0)
        bits = bitmask_to_bool(mask, vocab.vocab_size)[0]
        for probe in probes:
            accepted = m.accept_token(probe)
            assert accepted == bool(bits[probe]), (name, qwen_tokenizer.decode([probe]))
            if accepted:
                m.rollback(1)
        assert m.accept_token(token)
    eos = vocab.eos_token_ids[0]
    assert m.accept_token(eos)


def test_email_lengths_are_pydantics(qwen_compiler, qwen_tokenizer):
    """``format: email`` is llguidance's native pattern (no length bounds: counted repeats make
    every position a new lexer state, ~400 us a token) plus the decode-time check with
    email-validator's rules: a local part past 64 characters and more than 8 labels are valid
    (non-strict), a domain label past 63 or an address past 254 is refused at the closing
    quote."""
    compiled = qwen_compiler.compile(Constraint.json_schema({"type": "string", "format": "email"}))
    assert accepts_text(compiled, qwen_tokenizer, json.dumps("a" * 65 + "@example.com"))
    assert accepts_text(compiled, qwen_tokenizer, json.dumps("a@b.c.d.e.f.g.h.i.j.com"))
    assert accepts_text(compiled, qwen_tokenizer, json.dumps("a@" + "b" * 63 + ".com"))
    assert not accepts_text(compiled, qwen_tokenizer, json.dumps("a@" + "b" * 64 + ".com"))
    assert not accepts_text(compiled, qwen_tokenizer, json.dumps("a@" + ("b" * 60 + ".") * 5 + "c"))
