"""``format: iri`` / ``iri-reference`` / ``uri-reference`` are grammar patterns
(``json_schema/references.py``): they must decide exactly as jsonschema's checkers do
(``rfc3987-syntax``'s RFC 3987 grammar, ``rfc3986-validator``'s RFC 3986 regex), on values
assembled from the pieces where the grammar's branches meet, and through a compiled matcher."""

from __future__ import annotations

import json
import random
import re

import pytest

from stencil.constraints import Constraint
from stencil.constraints.json_schema.references import IRI, IRI_REFERENCE, URI_REFERENCE

rfc3987_syntax = pytest.importorskip("rfc3987_syntax")
rfc3986_validator = pytest.importorskip("rfc3986_validator")

PIECES = [
    *("http", "urn", "a+b-c.d", "Z9", ":", "//", "/", "?", "#", "@", ".", "-", "~", "!", "'"),
    *("[", "]", "::", "1", "ff", "0:0", "v1.", "vF.x:", "255", "256", "1.2.3.4", "01"),
    *("%", "%4", "%41", "%zz", "é", "東", "\ue000", "\U0001f600", "\ufdd0", "\ud7ff"),
    *(" ", "\\", "^", "x:y", "?q\ue001", "#f\ue001", ":8080", "user:pw@", "1:2:3:4:5:6:7:8"),
    *("fe80::1:2:3:4:5", "[1:2:3:4:5:6:1.2.3.4]", "[::1:2:3:4:5:6]", "[::1]", "[1:2::]"),
]
# RFC 3986's IPv6 forms and dec-octets, and the newline ``re.match(...$)`` lets through
URI_PIECES = [
    *("a:", "//", "/", "?", "#", "@", ":", "x", "%41", "%g", "[", "]", "\n", "\r", " ", "é"),
    *("::", "1:", "ff:", "0", "1.2.3.4", "001.2.3.04", "256.1.1.1", "v7.a", "1:2:3:4:5:6:7"),
    *("[::1]", "[1::]", "[1:2:3:4:5:6:7:8]", "[::ffff:01.2.3.4]", "[1:2:3:4:5:6:7::]"),
    *("[1:2:3:4:5:6::8]", "[1::2:3:4:5:6:7]", "[::2:3:4:5:6:7:8]", "[1:2::3:4:5:6:7]"),
]
STARTS = ["", "http://", "urn:", "//", "a:"]


def _values(n: int, pieces: list[str], seed: int = 3987) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(STARTS) + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        for _ in range(n)
    ]


def _rfc3986(value: str) -> bool:
    return bool(rfc3986_validator.validate_rfc3986(value, rule="URI_reference"))


CHECKERS = [
    (IRI, PIECES, lambda v: rfc3987_syntax.is_valid_syntax("iri", v)),
    (IRI_REFERENCE, PIECES, lambda v: rfc3987_syntax.is_valid_syntax("iri_reference", v)),
    (URI_REFERENCE, URI_PIECES, _rfc3986),
]


@pytest.mark.parametrize(
    ("pattern", "pieces", "checker"), CHECKERS, ids=["iri", "iri-ref", "uri-ref"]
)
def test_pattern_decides_as_the_checker(pattern, pieces, checker):
    compiled = re.compile(pattern)
    values = _values(500, pieces)
    verdicts = [checker(v) for v in values]
    assert 50 < sum(verdicts) < len(values) - 50  # both sides are exercised
    wrong = [v for v, ok in zip(values, verdicts, strict=True) if bool(compiled.fullmatch(v)) != ok]
    assert wrong == []


CASES = {
    "iri": [
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
    ],
    "uri-reference": [
        "http://[::1]/a?b#c",
        "//[::ffff:001.2.3.4]:8080",  # leading zeros in a dec-octet
        "//[1:2:3:4:5:6:7::8]",
        "../a/%41",
        "a:b\n",  # re.match's $ before a final newline
        "a:b\n\n",
        "\\\\WINDOWS\\fileshare",
        "#frag",
        "é",
        "",
    ],
}
CHECK = {
    "iri": lambda v: rfc3987_syntax.is_valid_syntax("iri", v),
    "iri-reference": lambda v: rfc3987_syntax.is_valid_syntax("iri_reference", v),
    "uri-reference": _rfc3986,
}


@pytest.mark.parametrize("fmt", ["iri", "iri-reference", "uri-reference"])
def test_matcher_decides_as_the_checker(qwen_compiler, qwen_tokenizer, fmt):
    from constraint_helpers import accepts_text

    compiled = qwen_compiler.compile(
        Constraint.json_schema({"type": "string", "format": fmt}, allow_undeclared_properties=True)
    )
    assert type(compiled.new_matcher()).__name__ == "Matcher"  # no decode-time check
    for value in CASES["iri" if fmt == "iri-reference" else fmt]:
        expected = CHECK[fmt](value)
        text = json.dumps(value, ensure_ascii=False)
        assert accepts_text(compiled, qwen_tokenizer, text) is expected, value
