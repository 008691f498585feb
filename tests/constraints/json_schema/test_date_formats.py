"""``format: "date"`` / ``"date-time"`` admit exactly what jsonschema's ``FormatChecker`` (the
format oracle of these tests) accepts: no year 0000 (RFC 3339's ABNF allows it, Python's
``date`` does not), days within their month, February 29 only in leap years, no leap second
(``rfc3339-validator`` refuses second 60). See ``stencil/constraints/json_schema/dates.py``."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from constraint_helpers import accepts_text

from stencil.constraints import Constraint
from stencil.constraints.json_schema.dates import DATE_TIME, FULL_DATE

CHECKER = jsonschema.FormatChecker()
# without rfc3339-validator, jsonschema skips date-time / time and every text "conforms"
assert {"date", "date-time", "time"} <= set(CHECKER.checkers), "install rfc3339-validator"
YEARS = ["0000", "0001", "0004", "0100", "0400", "1900", "2000", "2023", "2024", "2100", "9999"]
TIMES = [
    "00:00:00Z",
    "23:59:59z",
    "23:59:60Z",
    "24:00:00Z",
    "12:60:00Z",
    "12:00:00.25+05:30",
    "12:00:00-23:59",
    "12:00:00+24:00",
    "12:00:00",
]


def test_date_pattern_agrees_with_format_checker():
    """Every month 00-13 and day 00-32 of sample years, and February 29 of every year."""
    dates = [f"{y}-{m:02d}-{d:02d}" for y in YEARS for m in range(14) for d in range(33)]
    dates += [f"{y:04d}-02-29" for y in range(10_000)]
    pattern = re.compile(FULL_DATE)
    for text in dates:
        assert bool(pattern.fullmatch(text)) is CHECKER.conforms(text, "date"), text


def test_date_time_pattern_agrees_with_format_checker():
    pattern = re.compile(DATE_TIME)
    for date in ["0000-01-01", "0001-01-01", "2023-02-29", "2024-02-29", "2024-04-31"]:
        for separator in "Tt ":
            for time in TIMES:
                text = f"{date}{separator}{time}"
                assert bool(pattern.fullmatch(text)) is CHECKER.conforms(text, "date-time"), text


@pytest.mark.parametrize(
    ("fmt", "texts"),
    [
        (
            "date",
            ["0000-01-01", "0001-01-01", "2023-02-29", "1900-02-29", "2000-02-29", "2024-02-29"]
            + ["2024-04-30", "2024-04-31", "2024-13-01", "2024-00-10", "2024-01-00", "2024-01-32"],
        ),
        (
            "date-time",
            [f"2024-02-29T{t}" for t in TIMES]
            + ["0000-01-01T00:00:00Z", "2023-02-29T00:00:00Z", "2024-01-01t10:00:00z"],
        ),
    ],
)
def test_compiled_formats_agree_with_format_checker(fmt, texts, qwen_compiler, qwen_tokenizer):
    schema = {"type": "string", "format": fmt}
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    oracle = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    for text in texts:
        expected = oracle.is_valid(text)
        assert accepts_text(compiled, qwen_tokenizer, json.dumps(text)) is expected, text


def test_time_agrees_with_the_2020_12_format_checker(qwen_compiler, qwen_tokenizer):
    """``time`` is RFC 3339 full-time (offset required, no leap second) in drafts 2019-09+."""
    schema = {"type": "string", "format": "time"}
    compiled = qwen_compiler.compile(Constraint.json_schema(schema))
    oracle = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for text in TIMES + ["23:59:60+01:00", "00:00:00.000001-00:00"]:
        assert accepts_text(compiled, qwen_tokenizer, json.dumps(text)) is oracle.is_valid(text), (
            text
        )
