"""JSON Schema patterns mean what ECMA-262 says (JSON Schema 2020-12 validation §6.3.3), not
what Rust's or Python's ``regex`` say.

The oracle is ECMA-262 (2024) itself, written out here: §22.2.2.9 CharacterClassEscape
(``\\d`` = 0-9, ``\\w`` = A-Z a-z 0-9 _, ``\\s`` = WhiteSpace §12.2 + LineTerminator §12.3)
and §22.2.2.7 (``.`` = anything but a LineTerminator), with Zs taken from ``unicodedata``.
jsonschema cannot be the oracle: it runs patterns with Python ``re``, whose ``\\d`` matches
'٣' and whose ``\\s`` matches U+0085 but not U+FEFF. Python ``re`` is the independent engine
that runs the rewritten patterns below."""

from __future__ import annotations

import json
import re
import unicodedata

import jsonschema
import pytest
from constraint_helpers import accepts_text

from stencil.constraints import Constraint
from stencil.constraints.json_schema.ecma_regex import ecma_pattern

_LINE_TERMINATORS = "\n\r\u2028\u2029"
_WHITESPACE = "\t\v\f\ufeff"  # plus every Zs


def ecma(escape: str, char: str) -> bool:
    """Does ECMA-262 class escape ``escape`` (``d w s D W S`` or ``.``) match ``char``?"""
    if escape == ".":
        return char not in _LINE_TERMINATORS
    positive = {
        "d": "0" <= char <= "9",
        "w": char.isascii() and (char.isalnum() or char == "_"),
        "s": char in _LINE_TERMINATORS + _WHITESPACE or unicodedata.category(char) == "Zs",
    }[escape.lower()]
    return positive != escape.isupper()


# ASCII, the characters where ECMA and Unicode-aware engines part, and a sweep of the BMP
# and beyond (digits and letters of other scripts, every Zs, surrogates excluded).
SAMPLES = sorted(
    {chr(c) for c in range(0x80)}
    | set("٣١２é\u00a0\u0085\ufeff\u1680\u180e\u200b\u2028\u2029\u3000\U0001d7ce")
    | {chr(c) for c in range(0x80, 0x110000, 997) if not 0xD800 <= c <= 0xDFFF}
)
ESCAPES = ["d", "w", "s", "D", "W", "S"]


@pytest.mark.parametrize("escape", ESCAPES)
@pytest.mark.parametrize("form", ["\\{}", "[\\{}]", "[#\\{}]", "[^\\{}]"])
def test_rewritten_class_escapes_mean_ecma_under_python_re(escape, form):
    rewritten = re.compile(ecma_pattern(form.format(escape)))
    for char in SAMPLES:
        expected = ecma(escape, char)
        if form.startswith("[#"):
            expected = expected or char == "#"
        if form.startswith("[^"):
            expected = not expected
        assert bool(rewritten.fullmatch(char)) is expected, (form.format(escape), hex(ord(char)))


def test_dot_excludes_every_line_terminator():
    rewritten = re.compile(ecma_pattern("a.b"))
    for char in SAMPLES:
        assert bool(rewritten.fullmatch(f"a{char}b")) is ecma(".", char), hex(ord(char))
    assert ecma_pattern("[.]") == "[.]"  # a literal inside a class


@pytest.mark.parametrize(
    "pattern",
    [r"\\d", r"[\\d]", r"a\\\\d", r"\p{Nd}", r"[]\\]", r"x{2}\.\u0041", r"^(0|[1-9][0-9]*)$"],
)
def test_escaped_backslashes_and_other_escapes_are_kept(pattern):
    assert ecma_pattern(pattern) == pattern


def test_schema_digit_is_ascii(qwen_compiler, qwen_tokenizer):
    schema = {"type": "string", "pattern": "^\\d+$"}
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    for text in ["0", "123"]:
        assert accepts_text(compiled, qwen_tokenizer, json.dumps(text))
    for text in ["٣", "1٣", "１", "\U0001d7ce"]:  # Arabic-Indic, fullwidth, mathematical digits
        assert re.fullmatch(r"\d+", text)  # what jsonschema's Python `re` would say
        assert not accepts_text(compiled, qwen_tokenizer, json.dumps(text, ensure_ascii=False))


@pytest.mark.parametrize(
    ("pattern", "escape"),
    [
        ("^\\s$", "s"),
        ("^[\\s]$", "s"),
        ("^\\S$", "S"),
        ("^[^\\s]$", "S"),
        ("^.$", "."),
        ("^\\w$", "w"),
    ],
)
def test_schema_pattern_classes_follow_ecma(pattern, escape, qwen_compiler, qwen_tokenizer):
    compiled = qwen_compiler.compile(Constraint.json_schema({"type": "string", "pattern": pattern}))
    for char in "a \t\r\u00a0\u0085\ufeff\u2028\u2029\u3000\u200bé٣":
        text = json.dumps(char, ensure_ascii=False)
        assert accepts_text(compiled, qwen_tokenizer, text) is ecma(escape, char), hex(ord(char))


def test_pattern_properties_and_property_names_use_ecma(qwen_compiler, qwen_tokenizer):
    keyed = {
        "type": "object",
        "patternProperties": {"^\\w+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    named = {"type": "object", "propertyNames": {"pattern": "^\\w+$"}}
    for schema in (keyed, named):
        compiled = qwen_compiler.compile(Constraint.json_schema(schema))
        assert accepts_text(compiled, qwen_tokenizer, '{"a_1": 1}')
        assert not accepts_text(compiled, qwen_tokenizer, '{"é": 1}')
        assert not accepts_text(compiled, qwen_tokenizer, '{"٣": 1}')


def test_pattern_properties_equal_once_rewritten_both_apply(qwen_compiler, qwen_tokenizer):
    schema = {
        "type": "object",
        "patternProperties": {"^\\d$": {"type": "integer"}, "^[0-9]$": {"minimum": 5}},
        "additionalProperties": False,
    }
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    oracle = jsonschema.Draft202012Validator(schema)  # ASCII keys: Python re agrees with ECMA
    for text in ['{"3": 7}', '{"3": 2}', '{"3": "x"}', "{}"]:
        expected = oracle.is_valid(json.loads(text))
        assert accepts_text(compiled, qwen_tokenizer, text) is expected, text


def test_guided_regex_keeps_unicode_classes(qwen_compiler, qwen_tokenizer):
    """``Constraint.regex`` (vLLM's ``guided_regex``) is not JSON Schema: vLLM hands it to its
    backend as is, so ``\\d`` keeps its Unicode meaning there, as in Python ``re``."""
    compiled = qwen_compiler.compile(Constraint.regex(r"\d+"))
    for text in ["123", "٣", "１"]:
        assert accepts_text(compiled, qwen_tokenizer, text) is bool(re.fullmatch(r"\d+", text))
