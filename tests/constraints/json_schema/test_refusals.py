"""Every refusal names the keyword and the JSON pointer where it sits in the user's schema
(never llguidance's generated ``$defs`` or ``'schema' at '/'``), and what to write instead
where an exact alternative exists; the alternative, where given, compiles."""

from __future__ import annotations

import pytest

from stencil.constraints import Constraint, ConstraintError
from stencil.constraints.errors import UnsupportedSchemaError
from stencil.constraints.json_schema import _build
from stencil.constraints.json_schema.normalize import Normalizer
from stencil.constraints.json_schema.refusals import refusal
from stencil.constraints.limits import Limits
from stencil.constraints.translation import translate

REFUSALS = [  # schema, error type, keyword, pointer, words the message holds
    (
        {"properties": {"x": {"type": "string", "pattern": "^$[a-"}}},
        "InvalidRegexError",
        "pattern",
        "/properties/x/pattern",
        "unclosed character class",
    ),
    (
        {"patternProperties": {"^(a": {}}},
        "InvalidRegexError",
        "patternProperties",
        "/patternProperties/^(a",
        "unclosed group",
    ),
    (
        {"properties": {"a": {"$ref": "http://example.com/s.json"}}},
        "UnsupportedSchemaError",
        "$ref",
        "/properties/a/$ref",
        'copy the schema it names into "$defs"',
    ),
    (
        {"$defs": {"n": {"type": "object"}}, "properties": {"a": {"$dynamicRef": "#/$defs/n"}}},
        "UnsupportedSchemaError",
        "$dynamicRef",
        "/properties/a/$dynamicRef",
        'write {"$ref": "#/$defs/n"}',
    ),
    (
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "properties": {"a": {"$recursiveRef": "#"}},
        },
        "UnsupportedSchemaError",
        "$recursiveRef",
        "/properties/a/$recursiveRef",
        'write {"$ref": "#"}',
    ),
    (
        {
            "$defs": {"n": {"$dynamicAnchor": "n"}, "m": {"$dynamicAnchor": "n"}},
            "properties": {"a": {"$dynamicRef": "#n"}},
        },
        "UnsupportedSchemaError",
        "$dynamicRef",
        "/properties/a/$dynamicRef",
        "dynamic scope is not supported",
    ),
    (  # closed objects (the default): the anyOf branch admits no "a"
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
            "anyOf": [{"properties": {"b": {}}}],
        },
        "InvalidSchemaError",
        None,
        "/required",
        "required property 'a' can take no value",
    ),
    (  # a count llguidance cannot hold beside optional properties, merged through a $ref
        {
            "$defs": {"n": {"type": "object", "properties": {"k": {"$ref": "#/$defs/n"}}}},
            "$ref": "#/$defs/n",
            "properties": {"k": {"properties": {"k": {"minProperties": 1}}}},
        },
        "UnsupportedSchemaError",
        "minProperties",
        "/properties/k/properties/k/minProperties",
        "min/maxProperties",
    ),
]


@pytest.mark.parametrize(("schema", "kind", "keyword", "pointer", "words"), REFUSALS)
def test_refusal_names_keyword_and_pointer(schema, kind, keyword, pointer, words):
    constraint = Constraint.json_schema(schema)
    with pytest.raises(ConstraintError) as info:
        translate(constraint)
    error = info.value
    assert type(error).__name__ == kind, error
    assert getattr(error, "keyword", None) == keyword, error
    assert error.pointer == pointer, error
    assert words in str(error), error
    assert "$defs/d" not in str(error) and "'schema' at" not in str(error), error


@pytest.mark.parametrize(
    ("schema", "instead"),
    [  # the alternative a refusal names, written out, compiles
        (
            {"$defs": {"n": {"type": "object"}}, "properties": {"a": {"$dynamicRef": "#/$defs/n"}}},
            {"$defs": {"n": {"type": "object"}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
        ),
        (
            {
                "$schema": "https://json-schema.org/draft/2019-09/schema",
                "properties": {"a": {"$recursiveRef": "#"}},
            },
            {
                "$schema": "https://json-schema.org/draft/2019-09/schema",
                "properties": {"a": {"$ref": "#"}},
            },
        ),
    ],
)
def test_named_alternative_compiles(schema, instead):
    with pytest.raises(ConstraintError):
        translate(Constraint.json_schema(schema))
    assert translate(Constraint.json_schema(instead)).grammar


def test_circular_reference_named_where_the_ref_sits():
    """llguidance names the translator's generated ``$defs/dN``; the refusal names the user's
    ``$ref`` and the recursive subschema it reaches (here without the loosening retry, which
    makes this schema compile)."""
    schema = {
        "$defs": {
            "tree": {
                "type": "object",
                "properties": {"sub": {"allOf": [{"$ref": "#/$defs/tree"}, {"required": ["a"]}]}},
            }
        },
        "$ref": "#/$defs/tree",
    }
    normalized = Normalizer(schema, draft=2020, closed=True, limits=Limits()).run()
    _, _, message = _build(normalized.schema, {}, Limits())
    assert "circular references" in message and "$defs/d" in message
    error = refusal(message, normalized, schema)
    assert isinstance(error, UnsupportedSchemaError)
    assert (error.keyword, error.pointer) == ("$ref", "/$defs/tree/properties/sub/allOf/0/$ref")
    assert "'/$defs/tree'" in str(error) and "$defs/d" not in str(error)
