"""``spec_decode/step_cost.py``: the line fitted to observed forwards, its prior while it cannot be
fitted, and the batch size where drafting stops paying."""

from __future__ import annotations

import pytest

from stencil.engine.spec_decode.chance import STEP_ROWS
from stencil.engine.spec_decode.step_cost import MAX_ROWS, StepCost


@pytest.mark.parametrize(
    ("fixed", "per_row", "rows", "want"),
    [
        (0.0034, 0.0008, [1, 3, 6, 1, 2, 6, 4, 1, 5, 2], 4.25),  # the embedded model's step
        (0.040, 0.005, [1, 5, 5, 1, 3, 5, 2, 1, 6, 6, 1], 8.0),  # a 1.5B file's
        (0.050, 0.0001, [1, 2] * 6, 64.0),  # capped
    ],
)
def test_the_fitted_line_gives_step_rows(fixed, per_row, rows, want):
    cost = StepCost()
    for n in rows:
        cost.observe(n, fixed + per_row * n)
    assert cost.step_rows() == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(
    ("observed", "why"),
    [
        ([(1, 0.04)] * 20, "one row count only"),
        ([(1, 0.04), (5, 0.06)] * 3, "too few steps"),
        ([(1, 0.06), (5, 0.04)] * 6, "more rows took less time"),
        ([(1000, 1.0), (2000, 2.0)] * 6, "prefill-sized steps are not observed"),
    ],
)
def test_the_prior_holds_until_a_line_can_be_fitted(observed, why):
    cost = StepCost()
    for rows, seconds in observed:
        cost.observe(rows, seconds)
    assert cost.step_rows() == STEP_ROWS, why
    assert MAX_ROWS < 1000


@pytest.mark.parametrize(
    ("step_rows", "acceptance", "want"),
    [(3.0, 0.7, 6), (8.0, 0.6, 11), (3.0, 0.2, 1), (8.0, 0.99, 151)],  # B < 7, 12, 0.75, 152
)
def test_drafting_stops_where_its_rows_cost_more_than_they_save(step_rows, acceptance, want):
    cost = StepCost(prior=step_rows, acceptance=acceptance)
    assert cost.max_batch() == want


def test_acceptance_follows_the_verifications():
    cost = StepCost()
    for _ in range(200):
        cost.observe_drafts(5, 1)
    assert cost.acceptance == pytest.approx(0.2, abs=1e-3)
    cost.observe_drafts(0, 0)  # nothing drafted: no change
    assert cost.acceptance == pytest.approx(0.2, abs=1e-3)
