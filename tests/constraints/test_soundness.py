"""Property tests: random walks through the masks yield only strings the oracles accept, and
valid strings (canonical and random tokenizations) are accepted token by token."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import lark
import pytest
from constraint_helpers import accepts_tokens, random_tokenization, random_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stencil.constraints import Constraint

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "email": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
        },
        "required": ["name", "age", "email"],
        "additionalProperties": False,
    },
    {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"enum": [1, "two", None]},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                },
                "required": ["v"],
            }
        },
        "$ref": "#/$defs/node",
    },
    {
        "type": "array",
        "prefixItems": [{"type": "boolean"}, {"type": "number", "exclusiveMinimum": 0}],
        "items": {"type": "string", "pattern": "^[a-c]{1,3}$"},
        "maxItems": 4,
    },
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind", "x"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "b"}, "y": {"type": "boolean"}},
                "required": ["kind"],
            },
        ]
    },
]

REGEXES = [
    r"[0-9]{3}-[0-9]{4}",
    r"(ab|cd)*e",
    r"[a-z]{1,8}@[a-z]{2,5}\.(com|org)",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
    r"(yes|no|maybe)!?",
]

ARITH = r"""
start: expr
?expr: term | expr ("+" | "-") term
?term: atom | term ("*" | "/") atom
?atom: NUMBER | "(" expr ")"
NUMBER: /[0-9]{1,3}/
"""


def _walks(compiled, seed: int, n: int = 2, max_tokens: int = 80):
    rng = random.Random(seed)
    return [random_walk(compiled, rng, max_tokens) for _ in range(n)]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_json_walks_are_valid(qwen_compiler, index, seed):
    schema = SCHEMAS[index]
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for data, done in _walks(compiled, seed, max_tokens=150):
        if done:
            text = data.decode()
            assert len(text) - len(text.lstrip()) == 0
            validator.validate(json.loads(text))


@pytest.mark.parametrize("pattern", REGEXES)
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_regex_walks_match(qwen_compiler, pattern, seed):
    compiled = qwen_compiler.compile(Constraint.regex(pattern))
    for data, done in _walks(compiled, seed):
        if done:
            assert re.fullmatch(pattern, data.decode()), data


@pytest.mark.parametrize("pattern", REGEXES)
@SETTINGS
@given(data=st.data())
def test_regex_matches_are_accepted(qwen_compiler, qwen_tokenizer, pattern, data):
    text = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda s: s.isascii() and s))
    compiled = qwen_compiler.compile(Constraint.regex(pattern))
    eos = compiled.vocab.eos_token_ids[0]
    canonical = qwen_tokenizer.encode(text, add_special_tokens=False)
    assert accepts_tokens(compiled.new_matcher(), canonical, eos), text
    if len(text) > 1:
        other = random_tokenization(qwen_tokenizer, text, random.Random(len(text)))
        assert accepts_tokens(compiled.new_matcher(), other, eos), text


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_grammar_walks_parse(qwen_compiler, seed):
    compiled = qwen_compiler.compile(Constraint.grammar(ARITH))
    oracle = lark.Lark(ARITH, start="start")
    for data, done in _walks(compiled, seed, max_tokens=40):
        if done:
            oracle.parse(data.decode())


def _expr(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.4:
        return str(rng.randint(0, 999))
    if rng.random() < 0.3:
        return "(" + _expr(rng, depth + 1) + ")"
    return _expr(rng, depth + 1) + rng.choice("+-*/") + _expr(rng, depth + 1)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_grammar_sentences_are_accepted(qwen_compiler, qwen_tokenizer, seed):
    rng = random.Random(seed)
    text = _expr(rng)
    lark.Lark(ARITH, start="start").parse(text)
    compiled = qwen_compiler.compile(Constraint.grammar(ARITH))
    eos = compiled.vocab.eos_token_ids[0]
    assert accepts_tokens(compiled.new_matcher(), qwen_tokenizer.encode(text), eos)
    if len(text) > 1:
        assert accepts_tokens(
            compiled.new_matcher(), random_tokenization(qwen_tokenizer, text, rng), eos
        )


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_choice_walks(qwen_compiler, seed):
    choices = ["positive", "negative", "neutral", "pos", "n/a"]
    compiled = qwen_compiler.compile(Constraint.choice(choices))
    for data, done in _walks(compiled, seed):
        assert done
        assert data.decode() in choices


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_json_instances_random_tokenizations(qwen_compiler, qwen_tokenizer, index):
    """Valid instances found by walks, re-tokenized at random cut points, are accepted."""
    compiled = qwen_compiler.compile(Constraint.json_schema(SCHEMAS[index]))
    eos = compiled.vocab.eos_token_ids[0]
    rng = random.Random(index)
    texts = [d.decode() for d, done in _walks(compiled, 7, n=8, max_tokens=150) if done]
    assert texts, "no walk finished"
    for text in texts:
        for _ in range(3):
            tokens = (
                random_tokenization(qwen_tokenizer, text, rng)
                if len(text) > 1
                else qwen_tokenizer.encode(text)
            )
            assert accepts_tokens(compiled.new_matcher(), tokens, eos), text
