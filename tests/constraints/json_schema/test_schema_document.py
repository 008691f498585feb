"""The checks a schema document gets before translation: size and nesting, in full or shallow
(a deferred constraint: the request path checks size and nesting, the compile worker the rest)."""

from __future__ import annotations

import json

import pytest

from stencil.constraints import Constraint, ConstraintTooLargeError, translate
from stencil.constraints.json_schema import document
from stencil.constraints.limits import Limits

LIMITS = Limits(max_depth=4, max_enum=3)


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"items": schema}
    return schema


@pytest.mark.parametrize("shallow", [False, True])
def test_depth_limit_is_exact(shallow):
    document.load(_nested(LIMITS.max_depth), LIMITS, shallow=shallow)
    with pytest.raises(ConstraintTooLargeError, match="deeper than 4"):
        document.load(_nested(LIMITS.max_depth + 1), LIMITS, shallow=shallow)


@pytest.mark.parametrize(
    "text",
    [
        '{"description": "[[[[[[{{{{{"}',
        '{"description": "\\"[[[[[[[[\\\\"}',
        '{"pattern": "^\\\\[{5}$", "enum": ["}}}}]]]]"]}',
    ],
)
def test_brackets_inside_strings_do_not_nest(text):
    assert json.loads(text)  # valid JSON, depth 1 or 2
    document.check_depth_text(text, LIMITS)
    document.load(text, LIMITS)


def test_text_depth_matches_the_parsed_depth():
    for levels in range(1, 8):
        text = json.dumps(_nested(levels))
        deep = levels > LIMITS.max_depth
        try:
            document.check_depth_text(text, LIMITS)
        except ConstraintTooLargeError:
            assert deep
        else:
            assert not deep


def test_shallow_load_leaves_item_counts_to_the_translation():
    schema = {"enum": [1, 2, 3, 4]}  # past max_enum
    _, text = document.load(schema, LIMITS, shallow=True)
    assert json.loads(text) == schema
    with pytest.raises(ConstraintTooLargeError, match="max_enum|items"):
        document.load(schema, LIMITS)
    constraint = Constraint.json_schema(schema, limits=LIMITS)  # the cheap checks pass
    with pytest.raises(ConstraintTooLargeError):
        translate(constraint)


def test_schema_deeper_than_json_dumps_recurses_is_too_large():
    deep: dict = {}
    for _ in range(100_000):
        deep = {"items": deep}
    with pytest.raises(ConstraintTooLargeError):
        Constraint.json_schema(deep)
