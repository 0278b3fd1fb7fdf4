"""A minute of chaos under paced load (issue 25): a worker, a stage and the gateway each killed and
paused, then everything must come back with nothing held (``bench chaos`` is the longer run)."""

from __future__ import annotations

import argparse

import pytest

from omnivox.bench.chaos import DROPPED, SERVED, STUCK, chaos_run, settled

PLAN = ["kill worker", "pause stage", "kill gateway", "pause worker", "kill stage", "pause gateway"]


# a minute of faults and up to a minute to settle: past the suite's 120 s default on a busy machine
@pytest.mark.timeout(300)
def test_a_minute_of_chaos_answers_every_call_and_leaves_nothing_held(tmp_path):
    args = argparse.Namespace(
        seconds=60.0, callers=2, every_s=7.0, gateway_share=0.0, settle_s=60.0, seed=3, plan=PLAN
    )
    report = chaos_run(tmp_path / "logs", tmp_path / "data", args)
    assert sum(report["hits"].values()) >= len(PLAN), report["hits"]
    assert report["calls"].get(SERVED, 0) > 0, report
    assert report["calls"].get(STUCK, 0) == 0 and report["calls"].get(DROPPED, 0) == 0, report
    assert settled(report["left"]), report["left"]
    assert report["final_call"] == SERVED
    assert report["tracebacks"] == {}, report["tracebacks"]
