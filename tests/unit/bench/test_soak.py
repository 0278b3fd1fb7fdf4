"""The soak's arithmetic: growth per hour after the warm-up, and what counts as a failed turn."""

from __future__ import annotations

import math

import pytest

from omnivox.bench.soak import Sample, Turns, growth, growth_per_hour


def test_growth_per_hour_is_the_least_squares_slope():
    assert growth_per_hour([0, 1, 2, 3], [100, 101, 102, 103]) == pytest.approx(60.0)  # a MiB a minute
    assert abs(growth_per_hour([0, 1, 2, 3], [100, 103, 100, 103]) - 36.0) < 1e-6
    assert math.isnan(growth_per_hour([5], [1.0]))
    assert math.isnan(growth_per_hour([5, 5], [1.0, 2.0]))


def test_growth_leaves_the_warm_up_out():
    samples = [
        Sample(0, {"gateway": 100.0}, {"gateway": 10}, 0, 0),
        Sample(1, {"gateway": 300.0}, {"gateway": 40}, 5, 0),  # loading: left out
        Sample(2, {"gateway": 300.0}, {"gateway": 40}, 10, 0),
        Sample(3, {"gateway": 300.5}, {"gateway": 40}, 15, 0),
        Sample(4, {"gateway": 301.0}, {"gateway": 40}, 20, 0),
    ]
    g = growth(samples, warmup=2)["gateway"]
    assert g["rss_first_mib"] == 300.0 and g["rss_last_mib"] == 301.0
    assert g["rss_mib_per_h"] == pytest.approx(30.0) and g["files_per_h"] == pytest.approx(0.0)


def test_every_outcome_but_completed_is_a_failed_turn():
    turns = Turns()
    turns.outcomes.update({"completed": 10, "timeout": 1, "error worker_lost": 2})
    assert turns.failed == 3
