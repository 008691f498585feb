"""An optional number the model did not want is not stated (``odds.unwanted``): by the raw
logprobs of its value's digits, which the engine backend asks for such questions only."""

from __future__ import annotations

import pytest

from stencil.engine.outputs import Logprob, PositionLogprobs
from stencil.extract.odds import UNWANTED, reread, weighed_answer

OPTIONAL = {"type": "object", "properties": {"rooms": {"type": "number"}}}
REQUIRED = {**OPTIONAL, "required": ["rooms"]}


def answer(pieces: list[tuple[str, float]]) -> tuple[str, list[PositionLogprobs]]:
    positions = [
        PositionLogprobs(Logprob(i, t, lp), [Logprob(i, t, lp)]) for i, (t, lp) in enumerate(pieces)
    ]
    return "".join(t for t, _ in pieces), positions


def test_schemas_weighed():
    assert weighed_answer(OPTIONAL)
    assert weighed_answer({"properties": {"n": {"type": ["integer", "null"]}}})
    assert not weighed_answer(REQUIRED)  # a required number has no "not stated"
    assert not weighed_answer({"properties": {"n": {"type": "string"}}})
    assert weighed_answer({"properties": {"due_on": {"type": "string", "format": "date"}}})


@pytest.mark.parametrize(
    ("pieces", "kept"),
    [
        # a bilocale's 2 rooms is no stated number: the constraint pushed "1", "0" (1030)
        ([('{"rooms": ', 0.0), ("1", -0.1), ("0", -7.9), ("30", 0.0), ("}", -0.01)], False),
        ([('{"rooms": ', 0.0), ("3", -0.4), ("}", -0.2)], True),
        ([("{", -4.5), ('"rooms": ', 0.0), ("3", -0.4), ("}", -5.0)], True),  # format tokens
        ([('{"rooms": ', 0.0), ("14", 0.0), ("}", -0.01)], True),  # forced whole: no evidence
        ([('{"rooms": ', 0.0), ("4", UNWANTED + 0.1), ("}", 0.0)], True),
    ],
)
def test_an_unwanted_digit_leaves_the_number_out(pieces, kept):
    text, logprobs = answer(pieces)
    ids = list(range(len(pieces)))
    assert reread("rooms", OPTIONAL, text, ids, logprobs, str) == (text if kept else "{}")
    assert reread("rooms", REQUIRED, text, ids, logprobs, str) == text
    assert reread("rooms", OPTIONAL, text, ids, None, str) == text  # no odds: as answered


def test_an_unwanted_date_is_left_out():
    """A due date the invoice states none of (the model wanted one 14 days on; the constraint
    pushed a stated date's day on it) is not stated; one it wanted stays."""
    due = {"type": "object", "properties": {"due_on": {"type": "string", "format": "date"}}}
    head = [('{"due_on": "', 0.0), *((d, 0.0) for d in "2026-0"), ("3", -0.2), ("-", 0.0)]
    for day, kept in ([("0", -4.2), ("9", -3.6)], False), ([("2", -0.1), ("3", -0.3)], True):
        text, logprobs = answer([*head, *day, ('"}', 0.0)])
        ids = list(range(len(logprobs)))
        assert reread("due_on", due, text, ids, logprobs, str) == (text if kept else "{}")
