"""``oneOf`` -> ``anyOf``: branches told apart by hashing their ``const`` / ``enum`` values or a
discriminator property are not proven disjoint pair by pair (linear, not quadratic), and the
rewrite stays exact: jsonschema is the oracle of what each compiled schema accepts."""

from __future__ import annotations

import json

import jsonschema
import pytest
from constraint_helpers import accepts_text

from stencil.constraints import Constraint, ConstraintError, translate
from stencil.constraints.json_schema import logic
from stencil.constraints.json_schema.branch_index import BranchFacts, candidate_groups, pair_count
from stencil.constraints.json_schema.keywords import JSON_TYPES
from stencil.constraints.json_schema.logic import one_of_as_any_of

EVERY_TYPE = frozenset(JSON_TYPES)


def tagged(i: int, key: str = "kind") -> dict:
    return {"type": "object", "properties": {key: {"const": f"k{i}"}}, "required": [key]}


def closed(i: int) -> dict:
    return {
        "type": "object",
        "properties": {f"k{i}": {"type": "integer"}},
        "required": [f"k{i}"],
        "additionalProperties": False,
    }


def no_ref(ref: str) -> None:
    return None


@pytest.fixture
def proofs(monkeypatch) -> list:
    """The pairs ``one_of_as_any_of`` proves disjoint one by one (the quadratic part)."""
    seen: list = []
    prove = logic._disjoint

    def counted(a, b, *rest):
        seen.append((a, b))
        return prove(a, b, *rest)

    monkeypatch.setattr(logic, "_disjoint", counted)
    return seen


@pytest.mark.parametrize(
    "make",
    [lambda i: {"const": f"k{i}"}, lambda i: {"enum": [f"k{i}", i]}, tagged],
    ids=["const", "enum", "discriminator"],
)
def test_distinct_values_need_no_pairwise_proof(make, proofs):
    branches = [make(i) for i in range(3000)]
    assert one_of_as_any_of(branches, no_ref) == branches
    assert proofs == []  # was 4.5 M pairwise proofs (5-30 s)


def test_groups_keep_only_pairs_that_may_overlap():
    def facts(types, values=None, **tags):
        tags = {k: frozenset(v) for k, v in tags.items()}
        return BranchFacts(frozenset(types), values and frozenset(values), tags)

    branches = [
        facts({"null"}),
        facts({"object"}, kind={"a"}),
        facts({"object"}, kind={"b", "c"}, other={"x"}),
        facts({"object"}, kind={"c"}),  # shares "c" with the one before
        facts({"string"}, {'"s"'}),
        facts({"string"}),  # unbounded: may meet every string
        facts({"integer"}, {"1"}),
        facts({"number", "integer"}),  # numbers and integers share one group
    ]
    assert candidate_groups(branches) == [(6, 7), (2, 3), (4, 5)]
    assert pair_count(candidate_groups(branches)) == 3
    assert candidate_groups([facts({"object"}, kind={"a"}), facts({"object"}, tag={"a"})]) == [
        (0, 1)
    ]  # no property shared by all: no discriminator


def test_over_the_pairwise_bound_exclusivity_is_checked_at_decode_time(proofs):
    """Closed objects are told apart pair by pair (no value to hash); past the bound the
    ``oneOf`` becomes an ``anyOf`` whose exclusivity is checked as the value completes."""
    branches = [closed(i) for i in range(3200)]  # 5.1 M pairs > the 5 M bound
    assert one_of_as_any_of(branches, no_ref) is None
    assert proofs == []  # the bound is checked before any proof
    translation = translate(Constraint.json_schema({"oneOf": branches}))
    assert '"oneOf"' not in translation.grammar
    assert translation.checks == (("", "oneOf"),)
    assert one_of_as_any_of(branches[:300], no_ref) == branches[:300]  # proven pairwise


FILES = {
    "$defs": {
        "common": {"type": "object", "required": ["name", "type"]},
        "file": {"properties": {"type": {"enum": ["file"]}}},
        "dir": {"properties": {"type": {"enum": ["dir"]}, "n": {"type": "integer"}}},
    },
    "allOf": [
        {"$ref": "#/$defs/common"},
        {"oneOf": [{"$ref": "#/$defs/file"}, {"$ref": "#/$defs/dir"}]},
    ],
}
KEYED = {
    "required": ["k"],
    "oneOf": [{"properties": {"k": {"const": 1}}}, {"properties": {"k": {"const": 2}}}],
}
SCHEMAS = [  # (schema, texts, must compile: the hashing shows the branches exclusive)
    ({"oneOf": [{"const": f"k{i}"} for i in range(50)]}, ['"k3"', '"k49"', '"k50"', "3"], True),
    ({"oneOf": [{"const": 1}, {"const": 1.0}]}, ["1", "1.0"], False),  # equal: never one match
    ({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}, ['"a"', '"b"', '"c"'], False),
    (
        {
            "$defs": {"Cat": tagged(0, "pet") | {"properties": {"pet": {"const": "cat"}}}},
            "oneOf": [
                {"$ref": "#/$defs/Cat"},
                tagged(1, "pet") | {"properties": {"pet": {"enum": ["dog", "wolf"]}}},
                {"type": "null"},
            ],
        },
        ['{"pet": "cat"}', '{"pet": "wolf"}', '{"pet": "fox"}', "null", '"cat"'],
        True,
    ),
    (
        {"oneOf": [tagged(0), tagged(1), tagged(0) | {"properties": {"kind": {"enum": ["k0"]}}}]},
        ['{"kind": "k0"}', '{"kind": "k1"}'],
        False,
    ),
    ({"oneOf": [tagged(0, "a"), tagged(1, "b")]}, ['{"a": "k0"}', '{"a": "k0", "b": "k1"}'], False),
    # a property the branches constrain but only the context requires (``Presence``); keys
    # in the grammar's order (branch properties first)
    (FILES, ['{"type": "file", "name": "a"}', '{"type": "dir", "n": 1, "name": "a"}'], True),
    (FILES, ['{"name": "a"}', '{"type": "pipe", "name": "a"}', '"file"', "3"], True),
    (FILES | {"$defs": {**FILES["$defs"], "common": {"type": "object"}}}, ['{"n": 1}'], False),
    (KEYED | {"type": "object"}, ["{}", '{"k": 1}', '{"k": 3}', "3"], True),
    (KEYED, ['{"k": 2}', "3", "null"], False),  # non-objects match both branches
]


@pytest.mark.parametrize(
    ("schema", "texts", "must_compile"), SCHEMAS, ids=[json.dumps(s[0])[:50] for s in SCHEMAS]
)
def test_rewrite_agrees_with_jsonschema(schema, texts, must_compile, qwen_compiler, qwen_tokenizer):
    """Compiled, a schema accepts exactly what jsonschema accepts (a oneOf not shown
    exclusive by the rewrite is checked as its value completes)."""
    try:
        compiled = qwen_compiler.compile(
            Constraint.json_schema(schema, allow_undeclared_properties=True)
        )
    except ConstraintError:
        raise AssertionError("every oneOf compiles") from None
    assert must_compile or compiled.has_checks
    oracle = jsonschema.Draft202012Validator(schema)
    for text in texts:
        expected = oracle.is_valid(json.loads(text))
        assert accepts_text(compiled, qwen_tokenizer, text) is expected, text


def test_a_3000_branch_union_decodes_end_to_end(smol_compiler, smol_tokenizer):
    """Its first token has one Earley item per branch: past llguidance's default row limit
    (2,000) the matcher failed at that token; ``Limits.max_items_in_row`` follows max_enum."""
    schema = {"oneOf": [tagged(i) for i in range(3000)]}
    compiled = smol_compiler.compile(Constraint.json_schema(schema))
    for text in ('{"kind": "k2999"}', '{"kind":"k0"}'):
        jsonschema.validate(json.loads(text), schema)
        assert accepts_text(compiled, smol_tokenizer, text)
    assert not accepts_text(compiled, smol_tokenizer, '{"kind": "k3000"}')
