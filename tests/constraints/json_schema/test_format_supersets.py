"""The patterns put in the grammar beside a format's decode-time check (``FORMAT_SUPERSETS``)
must admit every value the check accepts, or valid output is refused: generated values the
checker accepts all match their pattern (and the patterns do refuse something)."""

from __future__ import annotations

import random
import re

import jsonschema
import pytest

from stencil.constraints.json_schema.keywords import FORMAT_SUPERSETS
from stencil.constraints.semantic.formats import format_checker

PIECES = [
    *("1", "9", "255", "256", "0", "00", ".", ":", "::", "ff", "FE80", "g", "/", "24", "64"),
    *("%", "%eth0", "%eth 0", "%é", "@", "a", "é", "東", " ", "\t", "-", "xn--", "{x}", "\x00"),
    *("1.2.3.4", "::1", "fe80::1", "255.255.255.0", "::ffff:1.2.3.4", "a.b", "ab@cd"),
]


def _values(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 5))) for _ in range(n)]


@pytest.mark.parametrize("fmt", sorted(FORMAT_SUPERSETS))
def test_superset_admits_every_valid_value(fmt):
    checker = format_checker(jsonschema.Draft202012Validator)
    if fmt not in checker.checkers:
        pytest.skip(f"no checker for {fmt!r} installed")
    pattern = re.compile(FORMAT_SUPERSETS[fmt])
    values = _values(3000, seed=len(fmt))
    valid = [v for v in values if checker.conforms(v, fmt)]
    assert valid, fmt  # the generator reaches valid values
    assert [v for v in valid if not pattern.fullmatch(v)] == []
    assert any(not pattern.fullmatch(v) for v in values)  # the pattern narrows something
