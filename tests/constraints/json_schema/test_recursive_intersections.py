"""Intersections inside a recursion (``json_schema/recursion.py``) compile, in every draft, and
decide as ``jsonschema`` does: ``allOf`` with a ``$ref`` into the cycle, a declared property a
``patternProperties`` pattern also matches, ``anyOf`` / ``oneOf`` of a recursive ``$ref`` beside
sibling keywords. Generated schemas of these shapes x drafts, random instances (valid and
not), each walked token by token through the mask (``differential.verdict``), then EOS."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from differential import verdict

from stencil.constraints import Constraint

DRAFTS = {  # draft -> ($schema, where definitions live)
    2020: ("https://json-schema.org/draft/2020-12/schema", "$defs"),
    2019: ("https://json-schema.org/draft/2019-09/schema", "$defs"),
    7: ("http://json-schema.org/draft-07/schema#", "definitions"),
    4: ("http://json-schema.org/draft-04/schema#", "definitions"),
}
VALIDATORS = {
    2020: jsonschema.Draft202012Validator,
    2019: jsonschema.Draft201909Validator,
    7: jsonschema.Draft7Validator,
    4: jsonschema.Draft4Validator,
}


def all_of(ref: str, extra: dict) -> dict:
    tree = {"type": "object", "properties": {"sub": {"allOf": [{"$ref": ref}, extra]}}}
    return tree


def pattern_properties(ref: str, extra: tuple[str, dict]) -> dict:
    pattern, sub = extra
    pals = {"type": "array", "items": {"$ref": ref}}
    return {
        "type": "object",
        "properties": {"pals": pals},
        "patternProperties": {pattern: {**pals, **sub}},
    }


def any_of(ref: str, extra: tuple[str, dict, dict]) -> dict:
    keyword, leaf, siblings = extra
    item = {"type": "object", **siblings, keyword: [{"$ref": ref}, leaf]}
    return {"type": "object", "properties": {"kids": {"type": "array", "items": item}}}


LEAF = {"properties": {"leaf": {"type": "boolean"}}, "required": ["leaf"]}
SHAPES = {
    "allOf": (
        all_of,
        [
            {"required": ["name"]},
            {"properties": {"name": {"type": "string", "maxLength": 2}}, "required": ["name"]},
            {"maxProperties": 1},
            {"not": {"required": ["x"]}},
        ],
    ),
    "patternProperties": (
        pattern_properties,
        [("^p", {}), ("a", {"maxItems": 1}), ("^pa", {"minItems": 1}), ("^p", {"type": "array"})],
    ),
    "anyOf": (
        any_of,
        [
            ("anyOf", {"properties": {"leaf": {"type": "boolean"}}}, {"minProperties": 1}),
            ("oneOf", LEAF, {}),
            ("anyOf", LEAF, {"maxProperties": 1}),
            ("oneOf", {"properties": {"leaf": {"type": "boolean"}}}, {"required": ["kids"]}),
        ],
    ),
}


def schema_for(shape: str, variant: Any, draft: int) -> dict:
    uri, where = DRAFTS[draft]
    build, _ = SHAPES[shape]
    ref = f"#/{where}/node"
    return {"$schema": uri, where: {"node": build(ref, variant)}, "$ref": ref}


def random_instance(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.3:
        return rng.choice([True, 1, "ab", "abc", None, {}])
    out: dict[str, Any] = {}
    for key in rng.sample(["sub", "name", "pals", "pika", "kids", "leaf", "x"], rng.randint(0, 3)):
        if key in ("pals", "pika", "kids"):
            out[key] = [random_instance(rng, depth + 1) for _ in range(rng.randint(0, 2))]
        elif key == "sub":
            out[key] = random_instance(rng, depth + 1)
        elif key == "leaf":
            out[key] = rng.choice([True, False, "no"])
        else:
            out[key] = rng.choice(["a", "abc", 3])
    return out


CASES = [
    (shape, i, draft)
    for shape, (_, variants) in SHAPES.items()
    for i in range(len(variants))
    for draft in DRAFTS
]


@pytest.mark.parametrize(("shape", "variant", "draft"), CASES)
def test_recursive_intersection_decides_as_jsonschema(
    smol_compiler, smol_tokenizer, shape, variant, draft
):
    schema = schema_for(shape, SHAPES[shape][1][variant], draft)
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, allow_undeclared_properties=True)
    )
    validator = VALIDATORS[draft](schema)
    rng = random.Random(f"{shape}{variant}{draft}")
    values = {json.dumps(v): v for v in (random_instance(rng) for _ in range(80))}
    counts = {True: 0, False: 0}
    for value in values.values():
        if not isinstance(value, dict):
            continue
        valid = validator.is_valid(value)
        counts[valid] += 1
        found = verdict(compiled, smol_tokenizer, value, "default", schema)
        assert found.accepted is valid, (value, valid, found)
    assert counts[True] >= 2 and counts[False] >= 2, counts


ISSUE = [  # the issue's three shapes and their valid instances
    (
        {
            "$defs": {
                "tree": {
                    "type": "object",
                    "properties": {
                        "sub": {"allOf": [{"$ref": "#/$defs/tree"}, {"required": ["name"]}]}
                    },
                }
            },
            "$ref": "#/$defs/tree",
        },
        {"sub": {"name": "x", "sub": {"name": "y"}}},
        {"sub": {"sub": {"name": "y"}}},
    ),
    (
        {
            "$defs": {
                "person": {
                    "type": "object",
                    "properties": {"pals": {"type": "array", "items": {"$ref": "#/$defs/person"}}},
                    "patternProperties": {
                        "^p": {"type": "array", "items": {"$ref": "#/$defs/person"}}
                    },
                }
            },
            "$ref": "#/$defs/person",
        },
        {"pals": [{"pals": []}]},
        {"pals": [{"pals": 1}]},
    ),
    (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "kids": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "anyOf": [
                                    {"$ref": "#/$defs/node"},
                                    {"properties": {"leaf": {"type": "boolean"}}},
                                ],
                            },
                        }
                    },
                }
            },
            "$ref": "#/$defs/node",
        },
        {"kids": [{"kids": []}, {"leaf": True}]},
        {"kids": [{"kids": []}, 3]},
    ),
]


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize(("schema", "valid", "invalid"), ISSUE)
def test_issue_shapes(smol_compiler, smol_tokenizer, schema, valid, invalid, closed):
    compiled = smol_compiler.compile(
        Constraint.json_schema(schema, allow_undeclared_properties=not closed)
    )
    assert verdict(compiled, smol_tokenizer, valid, "default", schema).accepted
    assert not verdict(compiled, smol_tokenizer, invalid, "default", schema).accepted
