"""A field is left out where the model's odds of "not stated" are near those of the value it
wrote (``stencil.extract.not_stated``), with the embedded model's real tokenizer: the answer's
tokens are the tokenizer's, the odds at the position where the answers part are set per case."""

from __future__ import annotations

import math
from typing import Any

import pytest

from stencil.engine.outputs import Logprob, PositionLogprobs
from stencil.extract.not_stated import (
    ABSENT_ODDS,
    leave_absent,
    not_stated_answers,
    not_stated_odds,
)
from stencil.extract.questions import field_question


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from stencil.engine.models.default_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


def _logprobs(tokenizer: Any, answer: str, parts_at: str, other: str, p_value: float, p_other):
    """The answer's token ids and, per token, the chosen token (``p_value`` at the first token
    after the text ``parts_at``, else 1) with ``other``'s first token beside it there."""
    ids = tokenizer(answer, add_special_tokens=False).input_ids
    out = []
    for i, t in enumerate(ids):
        at = tokenizer.decode(ids[:i]) == parts_at
        chosen = Logprob(t, tokenizer.decode([t]), math.log(p_value if at else 1.0))
        top = [chosen]
        if at:
            alt = tokenizer(other, add_special_tokens=False).input_ids[0]
            top.append(Logprob(alt, tokenizer.decode([alt]), math.log(p_other)))
        out.append(PositionLogprobs(chosen, top))
    return ids, out


def _schema(key: str, sub: dict, required: bool) -> dict:
    return field_question(key, sub, required).schema


OPTIONAL = _schema("currency", {"type": "string"}, False)
NULLABLE = _schema("end_year", {"type": ["integer", "null"]}, True)
REQUIRED = _schema("name", {"type": "string"}, True)


def test_the_not_stated_answers_follow_the_question_schema() -> None:
    assert not_stated_answers("currency", OPTIONAL) == ["{}"]
    assert not_stated_answers("end_year", NULLABLE) == ['{"end_year": null}']
    assert not_stated_answers("name", REQUIRED) == []


def _p(odds: float) -> float:
    """The probability of "not stated" that gives ``odds`` against stating the value."""
    return odds / (1 + odds)


@pytest.mark.parametrize(
    ("p_absent", "left_out"),
    [(0.45, True), (_p(ABSENT_ODDS) + 1e-6, True), (_p(ABSENT_ODDS * 0.8), False), (0.01, False)],
)
def test_an_optional_field_is_left_out_where_not_stated_is_near(
    tokenizer: Any, p_absent: float, left_out: bool
) -> None:
    p_value = 1 - p_absent
    answer = '{"currency": "EUR"}'
    ids, lps = _logprobs(tokenizer, answer, "{", "}", p_value, p_absent)
    if not any(p.top[1:] for p in lps):  # `{"` is one token: the answers part at the start
        ids, lps = _logprobs(tokenizer, answer, "", "{}", p_value, p_absent)
    odds, absent = not_stated_odds("currency", OPTIONAL, ids, lps, tokenizer.decode)
    assert absent == "{}"
    assert odds == pytest.approx(p_absent / p_value)
    got = leave_absent("currency", OPTIONAL, ids, lps, tokenizer.decode)
    assert got == ("{}" if left_out else None)


def test_a_nullable_field_is_null_where_not_stated_is_near(tokenizer: Any) -> None:
    answer = '{"end_year": 2020}'
    ids, lps = _logprobs(tokenizer, answer, '{"end_year": ', "null", 0.55, 0.45)
    got = leave_absent("end_year", NULLABLE, ids, lps, tokenizer.decode)
    assert got == '{"end_year": null}'
    ids, lps = _logprobs(tokenizer, answer, '{"end_year": ', "null", 0.95, 0.04)
    assert leave_absent("end_year", NULLABLE, ids, lps, tokenizer.decode) is None


def test_nothing_to_reread(tokenizer: Any) -> None:
    """A required field, an answer that is "not stated" already, no logprobs."""
    ids, lps = _logprobs(tokenizer, '{"name": "Ana"}', "", "{}", 0.5, 0.5)
    assert not_stated_odds("name", REQUIRED, ids, lps, tokenizer.decode) is None
    ids, lps = _logprobs(tokenizer, "{}", "", "{}", 1.0, 1e-9)
    assert not_stated_odds("currency", OPTIONAL, ids, lps, tokenizer.decode) is None
    assert not_stated_odds("currency", OPTIONAL, ids, None, tokenizer.decode) is None


def test_the_odds_add_up_along_the_path(tokenizer: Any) -> None:
    """``{`` then ``}`` beside ``{}`` at the first token: both count, the second by the odds of
    the path to it."""
    ids = tokenizer('{\n  "currency": "EUR"}', add_special_tokens=False).input_ids
    first, *rest = ids
    brace = tokenizer("{}", add_special_tokens=False).input_ids[0]
    close = tokenizer("{\n}", add_special_tokens=False).input_ids[1]
    head = Logprob(first, tokenizer.decode([first]), math.log(0.6))
    lps = [PositionLogprobs(head, [head, Logprob(brace, tokenizer.decode([brace]), math.log(0.2))])]
    value = Logprob(rest[0], tokenizer.decode([rest[0]]), math.log(0.5))
    lps.append(PositionLogprobs(value, [value, Logprob(close, "}", math.log(0.5))]))
    lps += [PositionLogprobs(c := Logprob(t, tokenizer.decode([t]), 0.0), [c]) for t in rest[1:]]
    absent = 0.2 + 0.6 * 0.5
    odds, _ = not_stated_odds("currency", OPTIONAL, ids, lps, tokenizer.decode)
    assert odds == pytest.approx(absent / (1 - absent))


def test_no_not_stated_alternative_in_the_top_means_odds_zero(tokenizer: Any) -> None:
    ids = tokenizer('{"currency": "EUR"}', add_special_tokens=False).input_ids
    lps = [PositionLogprobs(c := Logprob(t, tokenizer.decode([t]), -0.01), [c]) for t in ids]
    assert not_stated_odds("currency", OPTIONAL, ids, lps, tokenizer.decode) == (0.0, "{}")
