"""A string answer closes at a separator where the model's odds of closing it there are near
those of going on (``stencil.extract.span_ends``), with the embedded model's real tokenizer:
the answer's tokens are the tokenizer's, the odds at each token are set per case."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from stencil.engine.outputs import Logprob, PositionLogprobs
from stencil.extract.span_ends import (
    CLOSE_RATIO,
    close_at_separators,
    has_cut_strings,
    is_plain_string,
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from stencil.engine.models.default_model import default_model_path

    return AutoTokenizer.from_pretrained(str(default_model_path()))


def _field(key: str, sub: dict | None = None) -> dict[str, Any]:
    """A field question's answer schema: a one-key object."""
    return {"type": "object", "properties": {key: sub or {"type": "string"}}}


def _logprobs(tokenizer: Any, answer: str, cut_after: str, p_close: float, p_sep: float):
    """The answer's token ids and, per token, the chosen token (probability ``p_sep`` for the
    token after ``cut_after``, else 0.9) and a closing quote beside it (``p_close`` there,
    else 0.01)."""
    ids = tokenizer(answer, add_special_tokens=False).input_ids
    quote = tokenizer('"', add_special_tokens=False).input_ids[0]
    out = []
    for i, t in enumerate(ids):
        at = tokenizer.decode(ids[:i]).endswith(cut_after)
        chosen = Logprob(t, tokenizer.decode([t]), math.log(p_sep if at else 0.9))
        close = Logprob(quote, '"', math.log(p_close if at else 0.01))
        out.append(PositionLogprobs(chosen, [chosen, close]))
    return ids, out


CASES = [
    # answer, where the odds are set, P(close), P(separator), the answer's value after
    ('{"city": "Porto, Portugal"}', "Porto", 0.40, 0.55, "Porto"),
    ('{"city": "Porto, Portugal"}', "Porto", 0.05, 0.90, "Porto, Portugal"),  # close unlikely
    ('{"degree": "MSc Data (2020)"}', "MSc Data", 0.12, 0.88, "MSc Data"),
    (
        '{"degree": "MSc Data (2020)"}',
        "MSc",
        0.45,
        0.50,
        "MSc Data (2020)",
    ),  # ` Data`: no separator
    ('{"name": "Ana – 05 56"}', "Ana", 0.30, 0.60, "Ana"),
    ('{"city": "Porto"}', "Porto", 0.40, 0.55, "Porto"),  # nothing after: the answer as it is
    ('{"note": "a, b"}', '{"note": "a', 0.001, 0.9, "a, b"),
]


@pytest.mark.parametrize(("answer", "cut_after", "p_close", "p_sep", "want"), CASES)
def test_a_string_closes_at_a_separator_the_model_would_close_at(
    tokenizer, answer, cut_after, p_close, p_sep, want
):
    key = next(iter(json.loads(answer)))
    ids, lps = _logprobs(tokenizer, answer, cut_after, p_close, p_sep)
    closed = close_at_separators(_field(key), ids, lps, tokenizer.decode)
    assert json.loads(closed or answer) == {key: want}
    expect_cut = want != json.loads(answer)[key]
    assert (closed is not None) is expect_cut
    assert (p_close >= CLOSE_RATIO * p_sep) or not expect_cut


@pytest.mark.parametrize("forced", [(0, 1, 2), (1, 3), (4,)])
def test_jump_forward_tokens_without_logprobs_keep_the_cut_in_place(tokenizer, forced):
    """Tokens the constraint forces (jump-forward) come without logprobs: the cut still falls
    at the separator."""
    answer = '{"city": "Porto, Portugal"}'
    ids, lps = _logprobs(tokenizer, answer, "Porto", 0.40, 0.55)
    sampled = [lp for i, lp in enumerate(lps) if i not in forced]
    closed = close_at_separators(_field("city"), ids, sampled, tokenizer.decode)
    assert json.loads(closed) == {"city": "Porto"}


def test_no_odds_no_cut(tokenizer):
    ids = tokenizer('{"city": "Porto, Portugal"}', add_special_tokens=False).input_ids
    assert close_at_separators(_field("city"), ids, [], tokenizer.decode) is None


@pytest.mark.parametrize(
    ("sub", "cut"),
    [
        ({"type": "string"}, True),
        ({"type": ["string", "null"], "description": "x"}, True),
        ({"type": "string", "enum": ["a", "b"]}, False),
        ({"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}, False),  # `09:15` -> `09`
        ({"type": "string", "format": "date"}, False),
        ({"type": "number"}, False),
        ({"type": "array", "items": {"type": "string"}}, False),
    ],
)
def test_only_a_plain_string_is_cut(sub, cut):
    assert is_plain_string(sub) is cut
    assert has_cut_strings(_field("f", sub)) is cut


JOBS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"employer": {"type": "string"}, "from_year": {"type": "integer"}},
    },
}


@pytest.mark.parametrize(
    ("answer", "cut_after", "want"),
    [
        # a part of a list's object item: what follows it is the item's next key either way
        (
            '{"jobs": [{"employer": "Kaszub GmbH, Kartuzy", "from_year": 2014}]}',
            "Kaszub GmbH",
            {"jobs": [{"employer": "Kaszub GmbH", "from_year": 2014}]},
        ),
        (
            '{"jobs": [{"employer": "A", "from_year": 1}, {"employer": "B (Brno)", "from_year": 2}]}',
            '"employer": "B',
            {"jobs": [{"employer": "A", "from_year": 1}, {"employer": "B", "from_year": 2}]},
        ),
    ],
)
def test_a_list_items_string_part_closes_at_a_separator(tokenizer, answer, cut_after, want):
    ids, lps = _logprobs(tokenizer, answer, cut_after, 0.40, 0.55)
    assert has_cut_strings(_field("jobs", JOBS))
    assert json.loads(close_at_separators(_field("jobs", JOBS), ids, lps, tokenizer.decode)) == want


def test_an_item_of_a_list_of_strings_is_not_cut(tokenizer):
    """Where a list's string item ends decides what its next item is: not cut."""
    schema = _field("speakers", {"type": "array", "items": {"type": "string"}})
    answer = '{"speakers": ["Lucía Benítez, ceramista"]}'
    ids, lps = _logprobs(tokenizer, answer, "Benítez", 0.40, 0.55)
    assert not has_cut_strings(schema)
    assert close_at_separators(schema, ids, lps, tokenizer.decode) is None


def test_a_separator_inside_a_token_cuts_after_the_tokens_own_text():
    """Qwen writes ``s.r.o.,`` as ``.r`` ``.o`` ``.,``: the close is ``."`` beside ``.,``, and
    the value keeps the token's ``.`` (``Morava s.r.o.``)."""
    pieces = ['{"', "employer", '": "', "Morava s", ".r", ".o", ".,", " Brno", '"}']

    def decode(ids):
        return "".join(pieces[i] for i in ids)

    def position(i, p_chosen, alternative=None):
        chosen = Logprob(i, pieces[i], math.log(p_chosen))
        return PositionLogprobs(chosen, [chosen, *([alternative] if alternative else [])])

    close = Logprob(-1, '."}', math.log(0.25))
    lps = [position(i, 0.7, close) if pieces[i] == ".," else position(i, 0.9) for i in range(9)]
    closed = close_at_separators(_field("employer"), list(range(9)), lps, decode)
    assert json.loads(closed) == {"employer": "Morava s.r.o."}
