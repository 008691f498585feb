"""A string's ``pattern`` holds for the decoded value, whatever escapes spell it.

llguidance matches a pattern against the string as written (JSON-quoting the pattern), and its
quoting let ``\\\\`` and ``\\"`` through a class that excludes ``\\`` or ``"`` but holds every
control character (``^[^\\\\]+$`` accepted ``"js\\\\sub"``): ``json_schema/quoted_classes.py``.
Oracle: Python ``re`` on the decoded value; a case counts where ``jsonschema_rs`` (ECMA-262)
agrees. Spellings: ``json.dumps``'s and control characters as ``\\u00XX``, which must follow
the oracle both ways; ``\\u005c``, ``\\u0022`` and ``\\/`` (refused in pattern strings, a
documented departure) must never pass for a value the pattern refuses."""

from __future__ import annotations

import json
import random
import re

import jsonschema_rs
import pytest
from constraint_helpers import accepts_text

from stencil.constraints import Constraint
from stencil.constraints.json_schema.quoted_classes import guarded, unsafe

# atoms where Python re and ECMA-262 agree on the alphabet below (no CR, U+2028/9, \x1c-\x1f
# under \s)
ATOMS = [
    "a",
    '"',
    r"\\",
    r"\n",
    r"\t",
    "/",
    "é",
    ".",
    r"[^\\]",
    '[^"]',
    r'[^"\\]',
    r"[^\\\n]",
    '[a"]',
    r"[\\a]",
    r"[\x00-\x1f]",
    r"[^\x00-\x1f]",
    r'[\x00-\x1f"]',
    "[^a]",
    "[ -~]",
    "[^ -~]",
    r"[\s\S]",
    '[^,"]',
    r"(?:[\x00-\x0f]|[\x10-\x1f])",
    r"(?:a|[^\\])",
]
QUANTIFIERS = ["", "", "?", "*", "+", "{1,2}", "{2}"]
ALPHABET = ["a", '"', "\\", "\n", "\t", "\x01", "\x1f", "/", " ", "é", ","]
PATTERNS = 160
STRINGS = 24


def random_pattern(rng: random.Random) -> str:
    def sequence() -> str:
        return "".join(
            rng.choice(ATOMS) + rng.choice(QUANTIFIERS) for _ in range(rng.randint(1, 3))
        )

    body = sequence() if rng.random() < 0.8 else f"(?:{sequence()}|{sequence()})"
    if rng.random() < 0.8:
        return f"^{body}$"
    return body


def random_string(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4)))


def spellings(value: str) -> tuple[list[str], list[str]]:
    """(spellings that must follow the oracle, spellings that must never pass for an invalid
    value) of ``value`` as a JSON string."""
    plain = json.dumps(value, ensure_ascii=False)
    control = (
        '"'
        + "".join(
            f"\\u{ord(c):04X}" if ord(c) < 0x20 else json.dumps(c, ensure_ascii=False)[1:-1]
            for c in value
        )
        + '"'
    )
    unusual = plain.replace("\\\\", "\\u005c").replace('\\"', "\\u0022").replace("/", "\\/")
    return list(dict.fromkeys([plain, control])), [unusual]


def oracle(pattern: str, value: str) -> bool | None:
    """Python ``re`` on the decoded value; None where ECMA-262 reads it otherwise."""
    python = re.search(pattern, value) is not None
    ecma = jsonschema_rs.is_valid({"type": "string", "pattern": pattern}, value)
    return python if python == ecma else None


def test_differential_patterns_with_escapes(smol_compiler, smol_tokenizer):
    rng = random.Random(45)
    counts = {"valid": 0, "invalid": 0}
    failures = []
    for _ in range(PATTERNS):
        pattern = random_pattern(rng)
        compiled = smol_compiler.compile(
            Constraint.json_schema({"type": "string", "pattern": pattern})
        )
        for value in {random_string(rng) for _ in range(STRINGS)}:
            expected = oracle(pattern, value)
            if expected is None:
                continue
            counts["valid" if expected else "invalid"] += 1
            exact, never = spellings(value)
            for text in exact + ([] if expected else never):
                if accepts_text(compiled, smol_tokenizer, text) is not expected:
                    failures.append((pattern, text, expected))
    assert not failures, failures[:10]
    assert counts["valid"] > 500 and counts["invalid"] > 1500, counts


ISSUE = [  # the issue's repros: (pattern, value JSON, valid)
    (r"^[^\\]+$", r'"js\\sub"', False),
    (r"^[^\\]+$", r'"js/sub"', True),
    (r"^[^\\]+$", r'"a\nb"', True),
    ('^[^"]+$', r'"a\"b"', False),
    ('^[^"]+$', r'"a\nb"', True),
    (r"^[^\\\n]+$", r'"a\nb"', False),
    (r"^[^/\\:*?\"<>|]+$", r'"C:\\x"', False),
    (r"^[^/\\:*?\"<>|]+$", r'"name.txt"', True),
    (r"^(ftp|http|https)://[^ \"]+$", r'"http://a\"b"', False),
    (r"^(ftp|http|https)://[^ \"]+$", r'"http://a\\b"', True),
]


@pytest.mark.parametrize(("pattern", "text", "valid"), ISSUE)
def test_issue_repros_as_properties(smol_compiler, smol_tokenizer, pattern, text, valid):
    schema = {
        "type": "object",
        "properties": {"dest": {"type": "string", "pattern": pattern}},
        "required": ["dest"],
    }
    assert valid is (re.search(pattern, json.loads(text)) is not None)
    compiled = smol_compiler.compile(Constraint.json_schema(schema))
    full = '{"dest": ' + text + "}"
    assert accepts_text(compiled, smol_tokenizer, full) is valid
    if not valid:  # refused before EOS: some token of the value itself
        matcher = compiled.new_matcher()
        tokens = smol_tokenizer.encode(full, add_special_tokens=False)
        assert not all(matcher.accept_token(t) for t in tokens)


@pytest.mark.parametrize(
    ("schema", "text", "valid"),
    [  # an unsafe key pattern; a complement pattern (not enum) over escaped characters
        ({"patternProperties": {r"^[^\\]+$": {"type": "integer"}}}, r'{"a\\b": 1}', True),
        (
            {"patternProperties": {r"^[^\\]+$": {"type": "integer"}}},
            r'{"a\\b": "x"}',
            True,
        ),
        ({"patternProperties": {r"^[^\\]+$": {"type": "integer"}}}, r'{"ab": "x"}', False),
        (
            {
                "patternProperties": {r"^[^\\]$": {"type": "integer"}},
                "additionalProperties": False,
            },
            r'{"\\": 1}',
            False,
        ),
        ({"type": "string", "not": {"enum": ["\\x", '"']}}, r'"\\x"', False),
        ({"type": "string", "not": {"enum": ["\\x", '"']}}, r'"\""', False),
        ({"type": "string", "not": {"enum": ["\\x", '"']}}, r'"\\"', True),
        ({"type": "string", "not": {"enum": ["\\x", '"']}}, r'"\"x"', True),
    ],
)
def test_keys_and_complements(smol_compiler, smol_tokenizer, schema, text, valid):
    import jsonschema

    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid
    compiled = smol_compiler.compile(Constraint.json_schema(schema))
    assert accepts_text(compiled, smol_tokenizer, text) is valid


@pytest.mark.parametrize(
    ("pattern", "how"),
    [
        (r"^[a-z]+$", "safe"),
        (r"^[^\\]+$", "split"),
        (r'^[^"\\]*$', "split"),
        (r"^(?:a|[^\\])+$", "split"),
        (r"^[^\\]{1,255}$", "guard"),
        (r"^[\x00-\x1f]$", "guard"),
        (r"^[^\\]\\$", "checked"),  # admits a backslash elsewhere
        (r"[^\\]", "checked"),  # unanchored
        (r"(?x)[^\\]", "checked"),  # unread
    ],
)
def test_how_each_pattern_is_made_safe(pattern, how):
    safe = guarded(pattern)
    found = "checked" if safe.checked else "guard" if safe.guard else "safe"
    if found == "safe" and safe.pattern != pattern:
        found = "split"
    assert found == how, safe


def test_unsafe_sets():
    controls = frozenset(range(0x20))
    assert unsafe(controls | {0x22})  # no backslash
    assert unsafe((controls - {0x0A}) | {0x5C})  # no quote, LF aside
    assert not unsafe(controls | {0x22, 0x5C})
    assert not unsafe((controls - {0x0D}) | {0x22})  # a control character missing: exact
    assert unsafe(None)
