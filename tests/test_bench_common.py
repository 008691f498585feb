"""The benchmarks' one harness (``bench/common.py``): the percentile every table uses is numpy's
default, peers alternate A B A B with a peer that cannot run leaving the rotation, and the timing
runner warms every contender before the first timed run and keeps each run's load."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.common import MIN_ROUNDS, alternate, compare, percentile, results, summary, table

SAMPLES = [[5.0], [3.0, 1.0], [1.0, 2.0, 3.0, 4.0], [float(x) for x in range(1, 101)], [2.5] * 7]


@pytest.mark.parametrize("values", SAMPLES)
@pytest.mark.parametrize("q", [0, 1, 50, 90, 99, 99.9, 100])
def test_percentile_is_numpys_linear_interpolation(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_nan():
    assert math.isnan(percentile([], 50))


def test_alternate_calls_peers_in_turn_and_drops_one_that_cannot_run():
    calls: list[str] = []

    def peer(name: str, results: list):
        def run():
            calls.append(name)
            return results.pop(0)

        return run

    got = alternate(
        {"a": peer("a", [1, 2, 3]), "b": peer("b", [10, None]), "c": peer("c", [None])}, 3
    )
    assert calls == ["a", "b", "c", "a", "b", "a"]
    assert got == {"a": [1, 2, 3], "b": [10]}


def test_table_writes_markdown():
    assert table(["x", "y"], [["a", 1234.5], [1, "b"]]).splitlines() == [
        "| x | y |",
        "|---|---|",
        "| a | 1,234.50 |",
        "| 1 | b |",
    ]


def test_compare_warms_first_then_alternates_and_keeps_the_load():
    calls: list[str] = []
    runs = {name: (lambda name=name: calls.append(name) or float(len(calls))) for name in "ab"}
    warm = {name: (lambda name=name: calls.append(f"warm {name}")) for name in "ab"}
    got = compare(runs, 3, warm)
    assert calls == ["warm a", "warm b", "a", "b", "a", "b", "a", "b"]
    assert {k: results(v) for k, v in got.items()} == {"a": [3.0, 5.0, 7.0], "b": [4.0, 6.0, 8.0]}
    assert all(isinstance(r.load, float) and r.load >= 0 for v in got.values() for r in v)


@pytest.mark.parametrize("rounds", [1, MIN_ROUNDS])
def test_summary_names_rounds_and_load_and_flags_a_smoke_run(rounds):
    got = compare({"a": lambda: 1.0}, rounds)
    line = summary(got, rounds)
    assert f"medians of {rounds} alternated runs, 1-minute load " in line
    assert ("smoke run" in line) == (rounds < MIN_ROUNDS)
