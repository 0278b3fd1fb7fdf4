"""bench peer's pure parts: its arguments, the verdict on a run, the table with its omnivox/pipecat
ratio rows, and callers at real time."""

from __future__ import annotations

import argparse
import math
from typing import Any

import pytest

from omnivox.bench import peer
from omnivox.bench.paced_caller import PAUSE_S, CallerStats


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    peer.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_pair_a_silence_with_smart_turn_and_pace_callers_as_people():
    args = parse()
    assert args.users == [1, 2, 4] and args.turns == 3 and args.rounds == 1
    assert args.detection == ["server_vad", "high"] and args.silence_ms == 500
    assert args.pause_s == PAUSE_S
    assert parse("--pause-s", "2").pause_s == 2.0


def test_each_omnivox_turn_detection_has_its_pipecat_pair():
    assert peer.peer_detection("server_vad") == "server_vad"
    assert peer.peer_detection("high") == "smart_turn"
    assert peer.pairing("server_vad", 500) == "silence 500 ms"
    assert peer.pairing("high", 500) == "smart-turn / high"


def test_the_ratio_is_nan_when_a_side_is_missing_or_zero():
    assert peer.ratio(300.0, 600.0) == 0.5
    assert math.isnan(peer.ratio(1.0, 0.0))
    assert math.isnan(peer.ratio(float("nan"), 2.0))
    assert math.isnan(peer.ratio(2.0, float("nan")))


def stats(v2v: list[float], heard: list[float] | None = None, errors: list[str] | None = None) -> CallerStats:
    return CallerStats(v2v_s=v2v, heard_s=heard if heard is not None else v2v, errors=errors or [])


def test_a_run_is_summarised_from_what_its_callers_measured():
    r = peer.summarize(
        [stats([0.5, 0.7]), stats([0.6, 0.8], heard=[0.9, 1.1])],
        users=2,
        turns=2,
        wait_s=0.5,
        cpu_s=8.0,
        rss_mb=600.0,
    )
    assert r["turns"] == 4 and r["errors"] == []
    assert r["v2v_p50_ms"] == pytest.approx(650.0)
    assert r["cpu_s_per_turn"] == pytest.approx(2.0) and r["mb_per_session"] == pytest.approx(300.0)
    assert r["real_time"]  # p95 well under 0.5 s of silence + 1 s


def result(turns: int = 3, p95_ms: float = 900.0, errors: list[str] | None = None) -> dict[str, Any]:
    return {"turns": turns, "v2v_p95_ms": p95_ms, "errors": errors or []}


def test_real_time_needs_every_turn_answered_no_error_and_p95_inside_the_bound():
    assert peer.with_verdict(result(), 3, 0.5)["real_time"]
    assert not peer.with_verdict(result(turns=2), 3, 0.5)["real_time"]  # a turn never answered
    assert not peer.with_verdict(result(errors=["timeout"]), 3, 0.5)["real_time"]
    assert not peer.with_verdict(result(p95_ms=1500.0), 3, 0.5)["real_time"]  # 0.5 s + 1 s headroom
    assert peer.with_verdict(result(p95_ms=1499.0), 3, 0.5)["real_time"]


def run_result(stack: str, users: int, p50: float, real_time: bool = True, rnd: int = 1) -> dict[str, Any]:
    return {
        "stack": stack,
        "mode": "server_vad",
        "users": users,
        "round": rnd,
        "turns": 3 * users,
        "v2v_p50_ms": p50,
        "v2v_p95_ms": 2 * p50,
        "heard_p50_ms": p50 + 100,
        "heard_p95_ms": 2 * p50 + 100,
        "cpu_s_per_turn": 1.0,
        "mb_per_session": 400.0,
        "errors": [] if real_time else ["timeout"],
        "real_time": real_time,
        "load_1m": (1.25, 2.5),
    }


def test_the_table_puts_the_ratio_under_each_pair():
    rows = peer.table_rows([run_result("pipecat", 1, 800.0), run_result("omnivox", 1, 600.0)], 500)
    assert [r[0] for r in rows] == ["omnivox", "pipecat", peer.RATIO]  # omnivox first, whoever ran first
    assert all(len(r) == len(peer.COLUMNS) for r in rows)
    omnivox, _, ratio = rows
    assert omnivox[:5] == ["omnivox", "silence 500 ms", 1, 1, 3]
    assert omnivox[-3:] == [0, "yes", "1.2-2.5"]  # errors, real time, the load over the run
    p50 = peer.COLUMNS.index("v2v p50 ms")
    assert ratio[p50] == pytest.approx(0.75)  # omnivox's 600 ms over pipecat's 800
    assert ratio[peer.COLUMNS.index("CPU s/turn")] == pytest.approx(1.0)


def test_a_run_without_its_pair_has_no_ratio_row():
    rows = peer.table_rows([run_result("omnivox", 1, 600.0), run_result("pipecat", 4, 900.0)], 500)
    assert [r[0] for r in rows] == ["omnivox", "pipecat"]


def test_callers_at_real_time_is_the_most_that_held_in_every_round():
    results = [
        run_result("omnivox", 1, 600.0),
        run_result("omnivox", 4, 900.0),
        run_result("omnivox", 4, 900.0, real_time=False, rnd=2),  # 4 held once, not every time
        run_result("omnivox", 2, 700.0),
        run_result("pipecat", 1, 800.0, real_time=False),
    ]
    assert peer.callers_at_real_time(results, "omnivox", "server_vad") == 2
    assert peer.callers_at_real_time(results, "pipecat", "server_vad") == 0
    assert peer.callers_at_real_time(results, "omnivox", "high") == 0  # never run
    (row,) = peer.capacity_rows(results, ["server_vad"], 500)
    assert row[:3] == ["silence 500 ms", 2, 0] and math.isnan(row[3])  # no ratio over nothing
