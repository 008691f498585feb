"""Decode-time checks through the real engine: a request whose checks leave no continuation
finishes with finish_reason "error" naming the keyword (never a hang, never an invalid "stop");
jump-forward and close_on_length never complete a value a check refuses; a recursive Pydantic
tree closes validly under close_on_length however deep the model nests it. Oracles: jsonschema
(with format checking) and Pydantic."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import BaseModel, Field

from stencil import SamplingParams
from stencil.constraints import Constraint, translate
from stencil.testing.tiny_models import make_llm

DEAD_ENDS = {  # satisfiable by the grammar's prefixes, never by a complete value
    "uniqueItems": {
        "type": "array",
        "items": {"type": "string", "pattern": "^abc$"},
        "uniqueItems": True,
        "minItems": 2,
    },
    "if": {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^x$"}},
        "required": ["a"],
        "if": {"properties": {"a": {"pattern": "x"}}},
        "then": {"properties": {"a": {"maxLength": 0}}},
    },
    "not": {"type": "string", "pattern": "^ab$", "not": {"pattern": "b"}},
    "oneOf": {
        "type": "integer",
        "minimum": 1,
        "maximum": 3,
        "oneOf": [{"minimum": 0}, {"maximum": 5}],
    },
}

CHECKED = {  # satisfiable, but the natural close or a forced completion is not
    "uniqueItems forced": {  # jump-forward writes "ab; "abc" twice must be refused
        "type": "array",
        "items": {"type": "string", "pattern": "^ab(c|d)$"},
        "uniqueItems": True,
        "minItems": 2,
        "maxItems": 2,
    },
    "uniqueItems objects": {  # the closer's {"k": ""} twice must be refused
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"k": {"type": "string", "maxLength": 2}},
            "required": ["k"],
        },
        "uniqueItems": True,
        "minItems": 2,
    },
    "oneOf": {  # the closer's 0 is a multiple of both
        "type": "object",
        "properties": {
            "n": {
                "oneOf": [
                    {"type": "integer", "multipleOf": 2},
                    {"type": "integer", "multipleOf": 3},
                ]
            }
        },
        "required": ["n"],
    },
    "if/then/else": {  # the closer's "" for b fails "then" once a starts with x
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "string", "maxLength": 3},
        },
        "required": ["a", "b"],
        "if": {"properties": {"a": {"pattern": "^x"}}},
        "then": {"properties": {"b": {"pattern": "^y"}}},
        "else": {"properties": {"b": {"maxLength": 0}}},
    },
}


@pytest.fixture(scope="module")
def tiny_llm(tiny_models):
    return make_llm(tiny_models["llama-tied"], block_size=8, num_kv_blocks=512, max_model_len=512)


def _oracle(schema: dict) -> jsonschema.Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize("close", [False, True])
@pytest.mark.parametrize("keyword", list(DEAD_ENDS))
def test_checks_without_continuation_finish_with_an_error_naming_the_keyword(
    tiny_llm, keyword, close
):
    c = Constraint.json_schema(DEAD_ENDS[keyword])
    assert (("", keyword),) == translate(c).checks
    params = [
        SamplingParams(temperature=1.0, seed=s, max_tokens=96, close_on_length=close, constraint=c)
        for s in range(6)
    ]
    outs = tiny_llm.generate([[3, 4, 5]] * len(params), params, use_tqdm=False)
    for o in outs:
        out = o.outputs[0]
        assert out.finish_reason == "error", (out.finish_reason, out.text)
        assert f"'{keyword}'" in out.error and "decode-time check" in out.error, out.error


@pytest.mark.parametrize("name", list(CHECKED))
def test_jump_forward_and_close_on_length_respect_the_checks(tiny_llm, name):
    schema = CHECKED[name]
    c = Constraint.json_schema(schema)
    assert translate(c).checks, name  # a decode-time check, not a rewrite
    oracle = _oracle(schema)
    stops, outcomes = 0, set()
    for max_tokens in (10, 16, 24, 48):
        params = [
            SamplingParams(
                temperature=1.0, seed=s, max_tokens=max_tokens, close_on_length=True, constraint=c
            )
            for s in range(8)
        ]
        for o in tiny_llm.generate([[3, 4, 5]] * len(params), params, use_tqdm=False):
            out = o.outputs[0]
            outcomes.add(out.finish_reason)
            if out.finish_reason == "stop":
                stops += 1
                assert len(out.token_ids) <= max_tokens
                oracle.validate(json.loads(out.text))
            elif out.finish_reason == "error":
                assert "decode-time check" in out.error, out.error
            else:
                assert out.finish_reason == "length", out.finish_reason
    assert stops >= 8, (name, outcomes)


def test_jump_forward_stops_before_a_refused_completion(tiny_llm):
    """Every "stop" of the forced-prefix schema used jump-forward and still holds two distinct
    items."""
    c = Constraint.json_schema(CHECKED["uniqueItems forced"])
    before = tiny_llm.get_metrics()["jump_forward_tokens_total"]
    params = [
        SamplingParams(temperature=1.0, seed=s, max_tokens=48, constraint=c) for s in range(8)
    ]
    outs = tiny_llm.generate([[3, 4, 5]] * len(params), params, use_tqdm=False)
    assert tiny_llm.get_metrics()["jump_forward_tokens_total"] > before
    stops = [json.loads(o.outputs[0].text) for o in outs if o.outputs[0].finish_reason == "stop"]
    assert stops and all(sorted(v) == ["abc", "abd"] for v in stops), stops


class Node(BaseModel):
    name: str
    children: list[Node] = Field(default_factory=list, max_length=2)


def _nesting_bias(tokenizer) -> dict[int, float]:
    """Push the model into ever deeper trees: empty names, then a child (the issue's case of a
    real model nesting past what a fixed closing window can close)."""
    bias = {}
    for text, value in [('"', 14), (",", 14), ('",', 14), ("[", 12), ("{", 12), ("[{", 14),
                        ('{"', 14), (":", 10), ('":', 10), ("name", 10)]:  # fmt: skip
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) == 1:
            bias[ids[0]] = value
    return bias


@pytest.mark.parametrize("max_tokens", [120, 300])
def test_recursive_pydantic_tree_closes_validly_however_deep(tiny_llm, tokenizer, max_tokens):
    c = Constraint.json_schema(Node.model_json_schema())
    bias = _nesting_bias(tokenizer)
    params = [
        SamplingParams(
            temperature=1.0,
            seed=s,
            max_tokens=max_tokens,
            close_on_length=True,
            constraint=c,
            logit_bias=bias,
        )
        for s in range(6)
    ]
    outs = tiny_llm.generate([[3, 4, 5]] * len(params), params, use_tqdm=False)
    depths = []
    for o in outs:
        out = o.outputs[0]
        assert out.finish_reason == "stop", (out.finish_reason, out.text[-80:])
        assert len(out.token_ids) <= max_tokens
        depths.append(_depth(Node.model_validate_json(out.text)))
    # at 300 tokens, deeper than a close fitting the fixed 32-token window (it ended "length")
    assert max(depths) >= max_tokens // 20, depths


def _depth(node: Node) -> int:
    return 1 + max((_depth(child) for child in node.children), default=0)
