"""Constraint values and their translation: the cheap checks at construction, every other error
from ``translate`` (the compiler's first stage), canonical keys, the bad-input list of issue 3."""

from __future__ import annotations

import json
import time

import pytest

from stencil.constraints import (
    Constraint,
    ConstraintError,
    ConstraintTooLargeError,
    InvalidGrammarError,
    InvalidRegexError,
    InvalidSchemaError,
    UnsupportedSchemaError,
    translate,
)

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def _deep(levels: int) -> dict:
    root: dict = {}
    node = root
    for _ in range(levels):
        node["items"] = {}
        node = node["items"]
    return root


BAD_INPUTS = [
    ("invalid json", lambda: Constraint.json_schema('{"type": "object",'), InvalidSchemaError),
    ("not a schema", lambda: Constraint.json_schema({"type": "str"}), InvalidSchemaError),
    ("dangling ref", lambda: Constraint.json_schema({"$ref": "#/$defs/nope"}), InvalidSchemaError),
    ("invalid regex", lambda: Constraint.regex("(a"), InvalidRegexError),
    ("invalid grammar", lambda: Constraint.grammar("start: foo"), InvalidGrammarError),
    ("grammar syntax", lambda: Constraint.grammar("start: ("), InvalidGrammarError),
    ("empty choice", lambda: Constraint.choice([]), InvalidGrammarError),
    ("deep schema", lambda: Constraint.json_schema(_deep(10_000)), ConstraintTooLargeError),
    (
        "deep schema text",
        lambda: Constraint.json_schema('{"items":' * 10_000 + "{}" + "}" * 10_000),
        ConstraintTooLargeError,
    ),
    (
        "huge enum",
        lambda: Constraint.json_schema({"enum": list(range(1_000_000))}),
        ConstraintTooLargeError,
    ),
    ("huge repeat", lambda: Constraint.regex("a{2147483647}"), ConstraintTooLargeError),
    (
        "huge repeat in schema",
        lambda: Constraint.json_schema({"type": "string", "pattern": "a{99999}"}),
        ConstraintTooLargeError,
    ),
    ("nested repeat", lambda: Constraint.regex("(a{1000}){1000}"), ConstraintTooLargeError),
    (
        "minItems past the repetition limit",
        lambda: Constraint.json_schema({"type": "array", "minItems": 10**9}),
        ConstraintTooLargeError,
    ),
    (
        "minLength past the repetition limit",
        lambda: Constraint.json_schema({"type": "string", "minLength": 1e6}),
        ConstraintTooLargeError,
    ),
    ("pure ref cycle", lambda: Constraint.json_schema({"$ref": "#"}), InvalidSchemaError),
    (
        "two-step ref cycle",
        lambda: Constraint.json_schema(
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
        ),
        InvalidSchemaError,
    ),
    ("false schema", lambda: Constraint.json_schema(False), InvalidSchemaError),
    (
        "required recursion",
        lambda: Constraint.json_schema(
            {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
        ),
        InvalidSchemaError,
    ),
    (
        "array recursion",
        lambda: Constraint.json_schema(
            {
                "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}},
                "$ref": "#/$defs/n",
            }
        ),
        InvalidSchemaError,
    ),
    (
        "dynamic ref",
        lambda: Constraint.json_schema({"$dynamicRef": "#meta", "$dynamicAnchor": "meta"}),
        UnsupportedSchemaError,
    ),
    ("non-string choice", lambda: Constraint.choice(["a", 1]), InvalidGrammarError),
    ("bad whitespace", lambda: Constraint.json_schema({}, whitespace="lots"), ConstraintError),
]


# what construction alone refuses (types, text sizes, nesting); the rest waits for ``translate``
CHEAP = {
    "invalid json", "empty choice", "deep schema", "deep schema text", "huge enum",
    "non-string choice", "bad whitespace",
}  # fmt: skip


@pytest.mark.parametrize(("name", "make", "error"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_fast(name, make, error):
    start = time.perf_counter()
    with pytest.raises(error) as info:
        translate(make())
    assert time.perf_counter() - start < 2.0, name
    assert str(info.value), "error needs a message"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("name", "make", "error"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_construction_runs_only_the_cheap_checks(name, make, error):
    if name in CHEAP:
        with pytest.raises(error):
            make()
    else:
        assert isinstance(make(), Constraint)  # a plain value: nothing is translated yet


def test_unsupported_names_keyword_and_pointer():
    schema = {"type": "object", "properties": {"tags": {"$dynamicRef": "#x"}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        translate(Constraint.json_schema(schema))
    assert info.value.keyword == "$dynamicRef"
    assert info.value.pointer == "/properties/tags/$dynamicRef"
    assert "$dynamicRef" in str(info.value) and "/properties/tags" in str(info.value)


def test_unique_items_is_a_decode_time_check():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    assert translate(Constraint.json_schema(schema)).checks == (
        ("/properties/tags", "uniqueItems"),
    )


def test_budget_is_named():
    with pytest.raises(ConstraintTooLargeError) as info:
        translate(Constraint.regex("a{2147483647}"))
    assert info.value.budget == "max_repetition" and "max_repetition" in str(info.value)


def test_key_is_canonical_and_order_sensitive():
    a = Constraint.json_schema(PERSON)
    b = Constraint.json_schema(json.dumps(PERSON, indent=2))
    assert a.key == b.key and a == b and hash(a) == hash(b)
    reordered = {**PERSON, "properties": dict(reversed(PERSON["properties"].items()))}
    assert Constraint.json_schema(reordered).key != a.key  # property order is generation order
    assert Constraint.json_schema(PERSON, whitespace="compact").key != a.key
    assert Constraint.json_schema(PERSON, allow_undeclared_properties=True).key != a.key


def test_kinds():
    assert Constraint.json_schema(PERSON).kind == "json"
    assert Constraint.json_object().kind == "json"
    assert Constraint.regex(r"\d+").kind == "regex"
    assert Constraint.choice(["a", "b"]).kind == "choice"
    assert Constraint.grammar('start: "a"+').kind == "grammar"


def test_gbnf_is_translated():
    c = Constraint.grammar('root ::= "yes" | "no"')
    assert c.kind == "grammar" and "yes" in translate(c).grammar


def test_catastrophic_regexes_are_accepted_within_budget():
    for pattern in ["(a+)+b", "[ab]*a[ab]{20}"]:
        start = time.perf_counter()
        translate(Constraint.regex(pattern))
        assert time.perf_counter() - start < 1.0


def test_unknown_format_is_an_annotation_with_warning():
    c = translate(Constraint.json_schema({"type": "string", "format": "color-hex"}))
    assert any("color-hex" in w for w in c.warnings)


@pytest.mark.parametrize(
    "schema",
    [
        # OpenAI SDK strict schema (clients.md 2a)
        {
            "description": "Information about a person.",
            "properties": {
                "name": {"description": "Full name", "title": "Name", "type": "string"},
                "age": {"title": "Age", "type": "integer"},
                "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Email"},
            },
            "required": ["name", "age", "email"],
            "title": "Person",
            "type": "object",
            "additionalProperties": False,
        },
        # Pydantic nested model with $defs, pattern, items bounds, numeric bounds, enum
        {
            "$defs": {
                "Address": {
                    "properties": {"zip": {"pattern": "^[0-9]{5}$", "type": "string"}},
                    "required": ["zip"],
                    "type": "object",
                }
            },
            "properties": {
                "home": {"$ref": "#/$defs/Address"},
                "tags": {
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 3,
                    "type": "array",
                },
                "score": {"minimum": 0, "maximum": 10, "type": "number"},
                "kind": {"enum": ["a", "b"], "type": "string"},
                "email": {"default": None, "anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["home", "tags", "score", "kind"],
            "type": "object",
        },
        # recursive schema
        {
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "v": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["v", "children"],
                }
            },
            "$ref": "#/$defs/Node",
        },
        # draft-07 tuple items + definitions
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "number"}},
            "type": "array",
            "items": [{"$ref": "#/definitions/n"}, {"type": "string"}],
            "additionalItems": False,
        },
    ],
)
def test_client_schemas_compile(schema):
    assert translate(Constraint.json_schema(schema)).grammar


def test_grammar_json_rules_embed_translated_schemas(smol_compiler, smol_tokenizer):
    lark = 'start: "<a>" person "</a>"'
    c = Constraint.grammar(lark, json_rules={"person": PERSON})
    again = Constraint.grammar(lark, json_rules=json.dumps({"person": PERSON}))
    assert again.key == c.key and translate(again) == translate(c)
    reordered = {**PERSON, "properties": dict(reversed(PERSON["properties"].items()))}
    assert Constraint.grammar(lark, json_rules={"person": reordered}).key != c.key
    matcher = smol_compiler.compile(c).new_matcher()
    ok = '<a>{"name": "Ada", "age": 36}</a>'
    assert all(matcher.accept_token(t) for t in smol_tokenizer(ok).input_ids)
    assert matcher.is_accepting()
    matcher = smol_compiler.compile(c).new_matcher()
    extra = '<a>{"name": "Ada", "age": 36, "x"'  # declared properties only (closed)
    assert not all(matcher.accept_token(t) for t in smol_tokenizer(extra).input_ids)


@pytest.mark.parametrize("rules", [{"Bad-Name": PERSON}, {"p": 3}])
def test_grammar_json_rules_bad_input(rules):
    with pytest.raises(ConstraintError):
        translate(Constraint.grammar('start: "x" p', json_rules=rules))


def test_validate_raises_what_compile_would_and_caches_the_result(smol_compiler):
    bad = Constraint.json_schema({"type": "object", "properties": {"a": {"type": "strin"}}})
    with pytest.raises(InvalidSchemaError):
        smol_compiler.validate(bad)
    good = Constraint.json_schema({**PERSON, "title": "validated"})
    smol_compiler.validate(good)
    key = f"{smol_compiler.vocab.fingerprint}|{good.key}"
    assert smol_compiler.cache.get(key) is smol_compiler.compile(good)  # the request's compile
