"""``format: iri`` / ``iri-reference`` are grammar patterns (``json_schema/iris.py``): they must
decide exactly as jsonschema's checker does (``rfc3987-syntax``'s RFC 3987 grammar), on values
assembled from the pieces where the grammar's branches meet, and through a compiled matcher."""

from __future__ import annotations

import json
import random
import re

import pytest

from stencil.constraints import Constraint
from stencil.constraints.json_schema.iris import IRI, IRI_REFERENCE

rfc3987_syntax = pytest.importorskip("rfc3987_syntax")

PIECES = [
    *("http", "urn", "a+b-c.d", "Z9", ":", "//", "/", "?", "#", "@", ".", "-", "~", "!", "'"),
    *("[", "]", "::", "1", "ff", "0:0", "v1.", "vF.x:", "255", "256", "1.2.3.4", "01"),
    *("%", "%4", "%41", "%zz", "é", "東", "\ue000", "\U0001f600", "\ufdd0", "\ud7ff"),
    *(" ", "\\", "^", "x:y", "?q\ue001", "#f\ue001", ":8080", "user:pw@", "1:2:3:4:5:6:7:8"),
    *("fe80::1:2:3:4:5", "[1:2:3:4:5:6:1.2.3.4]", "[::1:2:3:4:5:6]", "[::1]", "[1:2::]"),
]
STARTS = ["", "http://", "urn:", "//", "a:"]


def _values(n: int, seed: int = 3987) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(STARTS) + "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        for _ in range(n)
    ]


@pytest.mark.parametrize(("fmt", "pattern"), [("iri", IRI), ("iri_reference", IRI_REFERENCE)])
def test_pattern_decides_as_the_checker(fmt, pattern):
    compiled = re.compile(pattern)
    values = _values(500)
    verdicts = [rfc3987_syntax.is_valid_syntax(fmt, v) for v in values]
    assert 50 < sum(verdicts) < len(values) - 50  # both sides are exercised
    wrong = [v for v, ok in zip(values, verdicts, strict=True) if bool(compiled.fullmatch(v)) != ok]
    assert wrong == []


CASES = [
    "http://ƒøø.ßår/?∂éœ=πîx#πîüx",
    "http://[1:2:3:4:5:6:7:8]:80/a",
    "http://[::1]/",  # not one of the checker's nine IPv6 forms
    "http://[v1.fe:x]/",
    "//foo.bar/?baz=qux#quux",
    "a:b c",
    "mailto:東@例え.jp",
    "urn:x?\ue000#y",
    "urn:x#\ue000",  # a private-use character only in the query
    "../é/%41",
    "%4",
    "",
]


@pytest.mark.parametrize("fmt", ["iri", "iri-reference"])
def test_matcher_decides_as_the_checker(qwen_compiler, qwen_tokenizer, fmt):
    from constraint_helpers import accepts_text

    compiled = qwen_compiler.compile(
        Constraint.json_schema({"type": "string", "format": fmt}, allow_undeclared_properties=True)
    )
    assert type(compiled.new_matcher()).__name__ == "Matcher"  # no decode-time check
    for value in CASES:
        expected = rfc3987_syntax.is_valid_syntax(fmt.replace("-", "_"), value)
        text = json.dumps(value, ensure_ascii=False)
        assert accepts_text(compiled, qwen_tokenizer, text) is expected, value
