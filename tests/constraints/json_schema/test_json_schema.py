"""JSON-Schema keyword behaviour, checked text by text (jsonschema is the oracle)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from constraint_helpers import accepts_text

from stencil.constraints import Constraint

# (schema, accepted texts, rejected texts); texts use json.dumps spacing.
CASES = [
    (
        {"type": "integer", "minimum": -3, "maximum": 12},
        ["-3", "0", "12"],
        ["13", "-4", "1.5", '"1"'],
    ),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3}, ["1", "2"], ["0", "3"]),
    ({"type": "number", "minimum": 0.5}, ["0.5", "2", "1000.25"], ["0.4", "-1"]),
    ({"type": "integer", "multipleOf": 5}, ["0", "15"], ["7"]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"'], ['"a"', '"abcd"']),
    ({"type": "string", "pattern": "^[0-9]{3}$"}, ['"123"'], ['"12"', '"1234"']),
    ({"type": "string", "pattern": "ab"}, ['"xaby"'], ['"xy"']),  # unanchored
    ({"type": "string", "pattern": "^a", "maxLength": 2}, ['"ab"'], ['"abc"', '"ba"']),
    ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2024-13-01"', '"x"']),
    ({"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123"']),
    ({"type": "string", "format": "ipv4"}, ['"10.0.0.1"'], ['"300.0.0.1"']),
    ({"type": "string", "format": "email"}, ['"a@b.co"'], ['"nope"']),
    ({"type": "string", "format": "date-time"}, ['"2024-01-01T10:00:00Z"'], ['"2024-01-01"']),
    ({"type": "string", "format": "json-pointer"}, ['"/a/b~1c"', '""'], ['"a/b"']),
    ({"enum": ["red", 3, None]}, ['"red"', "3", "null"], ['"blue"', "4"]),
    ({"const": {"a": [1, 2]}}, ['{"a": [1, 2]}'], ['{"a": [1]}']),
    ({"type": ["string", "null"]}, ['"x"', "null"], ["1"]),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ['"x"', "null"], ["1"]),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, ['"x"', "1"], ["null"]),
    (
        {
            "type": "object",
            "properties": {"k": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "additionalProperties": {"type": "integer"},
        },
        ['{"a": 1}', '{"b": 2}'],
        ['{"a": 1, "b": 2}', "{}"],
    ),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, ["2"], ["1", '"2"']),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
        ["[1]", "[1, 2]"],
        ["[]", "[1, 2, 3]", '["a"]'],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        ['["a", 1]', '["a"]'],
        ['["a", 1, 2]', "[1]"],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": {"type": "string"},
        },
        ['{"a": 1}', '{"a": 1, "z": "s"}'],
        ['{"a": 1, "z": 2}', "{}"],
    ),
    (
        {"type": "object", "dependentRequired": {"a": ["b"]}, "properties": {"a": {}, "b": {}}},
        ["{}", '{"b": 1}', '{"a": 1, "b": 2}'],
        ['{"a": 1}'],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"required": ["a"]}},
        ["{}"],
        ['{"a": 1}'],
    ),
    ({"not": {"type": "string"}}, ["1", "null"], ['"s"']),
    (
        {
            "type": "object",
            "propertyNames": {"enum": ["x", "y"]},
            "additionalProperties": {"type": "integer"},
        },
        ['{"x": 1}', '{"x": 1, "y": 2}'],
        ['{"z": 1}'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "additionalProperties": False,
            "minProperties": 1,
        },
        ['{"a": 1}', '{"b": 1}'],
        ["{}"],
    ),
    ({"type": "array", "uniqueItems": False}, ["[1, 1]"], []),
]


@pytest.mark.parametrize(
    ("schema", "good", "bad"), CASES, ids=[json.dumps(c[0])[:60] for c in CASES]
)
def test_keyword(schema, good, bad, qwen_compiler, qwen_tokenizer):
    compiled = qwen_compiler.compile(
        Constraint.json_schema(schema, allow_undeclared_properties=True)
    )
    oracle = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for text in good:
        assert oracle.is_valid(json.loads(text)), f"bad test case {text}"
        assert accepts_text(compiled, qwen_tokenizer, text), text
    for text in bad:
        assert accepts_text(compiled, qwen_tokenizer, text) is False, text


def test_recursive_schema_has_no_depth_cap(qwen_compiler, qwen_tokenizer):
    schema = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                "required": ["c"],
            }
        },
        "$ref": "#/$defs/n",
    }
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    deep = '{"c": []}'
    for _ in range(30):
        deep = '{"c": [' + deep + "]}"
    assert accepts_text(compiled, qwen_tokenizer, deep)


def test_undeclared_properties_default_closed(qwen_compiler, qwen_tokenizer):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    closed = qwen_compiler.compile(Constraint.json_schema(schema))
    open_ = qwen_compiler.compile(Constraint.json_schema(schema, allow_undeclared_properties=True))
    assert accepts_text(closed, qwen_tokenizer, '{"a": 1}')
    assert not accepts_text(closed, qwen_tokenizer, '{"a": 1, "b": 2}')
    assert accepts_text(open_, qwen_tokenizer, '{"a": 1, "b": 2}')
    explicit = {**schema, "additionalProperties": True}
    assert accepts_text(
        qwen_compiler.compile(Constraint.json_schema(explicit)), qwen_tokenizer, '{"a": 1, "b": 2}'
    )
    free = qwen_compiler.compile(
        Constraint.json_schema({"type": "object"})
    )  # no declared keys: a map
    assert accepts_text(free, qwen_tokenizer, '{"x": [1, {"y": null}]}')


def test_required_but_undeclared_key_is_allowed_when_closed(qwen_compiler, qwen_tokenizer):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]}
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    assert accepts_text(compiled, qwen_tokenizer, '{"a": 1, "b": "x"}')


def test_inheritance_allof_keeps_parent_keys(qwen_compiler, qwen_tokenizer):
    schema = {
        "$defs": {
            "Base": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            }
        },
        "allOf": [
            {"$ref": "#/$defs/Base"},
            {"properties": {"name": {"type": "string"}}, "required": ["name"]},
        ],
    }
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    assert accepts_text(compiled, qwen_tokenizer, '{"id": 1, "name": "x"}')


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('{"a": 1, "b": [1, 2]}', True),
        ('{"a":1,"b":[1,2]}', True),
        ('{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}', True),
        ('{\n\n  "a": 1, "b": []}', False),  # two newlines in one gap
        ('{"a": 1,   "b": []}', False),  # three spaces
        ("{" + "\n" + " " * 21 + '"a": 1, "b": []}', False),  # indent over 20
    ],
)
def test_bounded_whitespace(qwen_compiler, qwen_tokenizer, text, ok):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}}
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    assert accepts_text(compiled, qwen_tokenizer, text) is ok


def test_compact_and_custom_whitespace(qwen_compiler, qwen_tokenizer):
    schema = {"type": "array", "items": {"type": "integer"}}
    compact = qwen_compiler.compile(Constraint.json_schema(schema, whitespace="compact"))
    assert accepts_text(compact, qwen_tokenizer, "[1,2]")
    assert not accepts_text(compact, qwen_tokenizer, "[1, 2]")
    custom = qwen_compiler.compile(Constraint.json_schema(schema, whitespace_pattern=r"[ ]{0,2}"))
    assert accepts_text(custom, qwen_tokenizer, "[1,  2]")
    assert not accepts_text(custom, qwen_tokenizer, "[1,   2]")


def test_whitespace_runaway_is_impossible(qwen_compiler, qwen_vocab):
    """No path through the mask emits more than 21 whitespace bytes in a row."""
    from constraint_helpers import allowed

    compiled = qwen_compiler.compile(
        Constraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    )
    m = compiled.new_matcher()
    assert m.accept_token(qwen_vocab.llg_tokenizer.tokenize_str("{")[0])
    run = 0
    for _ in range(40):
        ws = [
            t for t in allowed(m, qwen_vocab) if (b := qwen_vocab.token_bytes(t)) and not b.strip()
        ]
        if not ws:
            break
        token = max(ws, key=lambda t: len(qwen_vocab.token_bytes(t)))
        assert m.accept_token(token)
        run += len(qwen_vocab.token_bytes(token))
    assert run <= 21
