"""JSONSchemaBench-dev (the ``corpus`` suite: ``--corpus-dir`` holds ``jsonschemabench-dev/``;
it has no licence file to ship it under): compile rate per category, soundness on its instances
and differential exactness (``differential.run_differential``) over a seeded sample.

Seeded samples keep CI short; ``bench/constraints/constraints_bench.py`` runs the full set."""

from __future__ import annotations

import random

import pytest
from differential import Outcome, run_differential
from suite_runner import Tally, bench_rows, run_group

pytestmark = pytest.mark.corpus

SAMPLE = 120  # schemas per category for the compile rate and the suite's own instances
PER_CATEGORY = 25  # schemas per category for the differential check
GENERATED = 3  # instances drawn per schema
VALID_FLOOR, INVALID_FLOOR = 550, 750  # of 602 valid writings and 797 invalid instances
# Compile rate floor per category (full-set rates: 99.95%, 99.65%, 99.24%; llguidance alone:
# 94.3%, 85.8%, 96.0%).
FLOORS = {"Github_easy": 0.99, "Github_medium": 0.98, "Glaiveai2K": 0.98}


def _sample(corpus_dir, category: str, seed: int, n: int) -> list[dict]:
    rows = bench_rows(corpus_dir, category)
    random.Random(seed).shuffle(rows)
    return rows[:n]


@pytest.fixture(scope="module")
def tallies(corpus_dir, qwen_compiler, qwen_tokenizer) -> dict[str, Tally]:
    out = {}
    for category in FLOORS:
        tally = Tally()
        for row in _sample(corpus_dir, category, 1234, SAMPLE):
            run_group(row["id"], row["schema"], row["tests"], qwen_compiler, qwen_tokenizer, tally)
        out[category] = tally
    return out


@pytest.mark.parametrize("category", list(FLOORS))
def test_compile_rate(tallies, category):
    tally = tallies[category]
    assert tally.compiled / tally.groups >= FLOORS[category], tally.errors


@pytest.mark.parametrize("category", list(FLOORS))
def test_no_invalid_instance_accepted(tallies, category):
    assert tallies[category].false_acceptances == []


@pytest.mark.parametrize("category", list(FLOORS))
def test_valid_instances_accepted(tallies, category):
    """Rejections left are property-order cases the test's key reordering cannot fix."""
    tally = tallies[category]
    assert len(tally.false_rejections) <= 0.02 * tally.valid, tally.false_rejections


@pytest.fixture(scope="module")
def outcome(corpus_dir, qwen_compiler, qwen_tokenizer) -> Outcome:
    cases = [
        (row["id"], row["schema"], row["tests"])
        for category in FLOORS
        for row in _sample(corpus_dir, category, 2026, PER_CATEGORY)
    ]
    return run_differential(cases, qwen_compiler, qwen_tokenizer, GENERATED)


def test_differential_every_schema_compiles_or_is_refused(outcome):
    assert outcome.crashes == []
    assert len(outcome.compiled) >= 0.85 * (len(outcome.compiled) + len(outcome.refused))


def test_differential_no_valid_instance_refused(outcome):
    assert len(outcome.valid) > VALID_FLOOR
    assert outcome.false_rejections == []


def test_differential_no_invalid_instance_accepted(outcome):
    assert len(outcome.invalid) > INVALID_FLOOR
    assert outcome.false_acceptances == []
