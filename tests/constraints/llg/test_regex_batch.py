"""``parsed_regexes``: one grammar build vouches for all of a schema's patterns, never for one
that llguidance's own per-pattern validation refuses; schemas mixing good and bad patterns
still get the per-pattern outcome (an error naming the pattern, or a decode-time check)."""

from __future__ import annotations

import llguidance
import pytest

from stencil.constraints import Constraint, translate
from stencil.constraints.errors import ConstraintTooLargeError, InvalidRegexError
from stencil.constraints.limits import DEFAULT_LIMITS
from stencil.constraints.llg.regex_check import check_regex, parsed_regexes

GOOD = [r"^[a-z]+$", r"x/y", r"\d{3}-\d{4}", "a\nb", r"^\p{L}+$", r"[^\s\S]", r"(a|b)*c", r'"q"']
BAD = [r"(", r"a{2,1}", r"(?=a)b", r"a$b", r"\1"]


def _llguidance_parses(pattern: str) -> bool:
    grammar = llguidance.LLMatcher.grammar_from_regex(pattern)
    return llguidance.LLMatcher.validate_grammar(grammar) == ""


def test_the_oracle_splits_the_corpus():
    assert all(_llguidance_parses(p) for p in GOOD)
    assert not any(_llguidance_parses(p) for p in BAD)


def test_vouches_for_all_parsing_patterns_and_none_beside_a_bad_one():
    assert parsed_regexes(GOOD, DEFAULT_LIMITS) == frozenset(GOOD)
    for bad in BAD:
        assert parsed_regexes([*GOOD, bad], DEFAULT_LIMITS) == frozenset()


def test_patterns_over_budget_are_left_to_the_per_pattern_check():
    huge = "a{100000}"
    vouched = parsed_regexes([*GOOD, huge], DEFAULT_LIMITS)
    assert huge not in vouched
    with pytest.raises(ConstraintTooLargeError):
        check_regex(huge, DEFAULT_LIMITS, parsed=vouched | {huge})  # budgets are always checked


def _schema(patterns: list[str]) -> dict:
    props = {f"p{i}": {"type": "string", "pattern": p} for i, p in enumerate(patterns)}
    return {"type": "object", "properties": props}


def test_a_bad_pattern_among_good_ones_is_still_named():
    with pytest.raises(InvalidRegexError) as err:
        translate(Constraint.json_schema(_schema([*GOOD[:3], "("])))
    assert "'('" in str(err.value)


def test_a_look_around_among_good_ones_is_still_checked_at_decode_time():
    c = translate(Constraint.json_schema(_schema([*GOOD[:3], r"^(?!ab)[a-c]{2}$"])))
    assert c.checks == (("/properties/p3", "pattern"),)
