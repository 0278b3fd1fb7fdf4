"""bench duplex: its arguments, its figures and table rows from results, and one short run against a
real cluster."""

from __future__ import annotations

import argparse
import json
import math

from omnivox.bench import duplex as bench


def test_summarize_splits_listen_and_speak_units_and_counts_lagging() -> None:
    a, b = bench.DuplexCallerStats(), bench.DuplexCallerStats()
    for r in (
        {"is_listen": True, "wall_clock_ms": 10.0},
        {"is_listen": False, "wall_clock_ms": 2.0, "lagging": True},
        {"is_listen": True, "wall_clock_ms": 30.0},
    ):
        a.add(r)
    b.add({"is_listen": False, "wall_clock_ms": 4.0})
    a.first_speak_s.append(0.5)
    b.errors.append("worker_lost")
    r = bench.summarize([a, b])
    assert r["units"] == 4 and r["speak_units"] == 2 and r["lagging"] == 1
    assert r["listen_p50_ms"] == 20.0 and r["speak_p50_ms"] == 3.0
    assert r["first_speak_p50_ms"] == 500.0 and r["replies"] == 1 and r["errors"] == ["worker_lost"]
    assert len(bench.row("cascade", 2, "deferred", r)) == len(bench.COLUMNS)


def test_a_short_run_prints_its_table_and_writes_json(tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    parser.add_argument("--json")
    out = tmp_path / "duplex.json"
    flags = "--engines cascade --users 1 --turns 1 --speed 6 --finalize inline --wait-units 10"
    args = parser.parse_args([*flags.split(), "--json", str(out)])
    assert bench.run(args) == 0
    table = capsys.readouterr().out
    assert "| cascade |" in table and "inline" in table
    result = json.loads(out.read_text())["duplex"]["cascade/n1/inline"]
    assert result["errors"] == [] and result["units"] >= 3
    assert result["speak_units"] >= 1 and result["replies"] == 1  # the echo LLM answered


def test_with_recording_on_it_says_what_the_recorder_wrote(tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    parser.add_argument("--json")
    out = tmp_path / "duplex.json"
    flags = "--engines cascade --users 1 --turns 1 --speed 6 --finalize inline --wait-units 10 --record on"
    assert bench.run(parser.parse_args([*flags.split(), "--json", str(out)])) == 0
    assert "| cascade |       1 |   inline |     on |" in capsys.readouterr().out
    result = json.loads(out.read_text())["duplex"]["cascade/n1/inline/record"]
    recorded = result["recorded"]
    assert recorded["sessions"] == recorded["complete"] == 1 and recorded["dropped_frames"] == 0
    assert recorded["minutes"] > 0 and 1 < recorded["mb_per_min"] < 50


def test_duplex_summary_of_nothing():
    r = bench.summarize([])
    assert r["units"] == 0 and r["speak_units"] == 0 and r["lagging"] == 0 and r["replies"] == 0
    assert math.isnan(r["listen_p50_ms"]) and math.isnan(r["first_speak_p95_ms"])
    assert r["errors"] == []


def test_duplex_row_without_a_recording_or_cpu():
    r = bench.summarize([bench.DuplexCallerStats()])
    row = bench.row("tiny", 1, "inline", r)
    assert len(row) == len(bench.COLUMNS)
    assert row[:4] == ["tiny", 1, "inline", "off"]
    assert math.isnan(row[-2]) and row[-1] == "-"


def test_duplex_row_with_a_recording_and_cpu():
    r = {**bench.summarize([]), "gateway_cpu_pct": 12.5, "recorded": {"mb_per_min": 1.25}}
    row = bench.row("cascade", 4, "deferred", r, record="on")
    assert row[3] == "on" and row[-2] == 12.5 and row[-1] == 1.25


def test_caller_stats_count_units_lagging_and_split_the_walls():
    s = bench.DuplexCallerStats()
    s.add({"is_listen": True, "wall_clock_ms": 5.0, "lagging": False})
    s.add({"is_listen": False, "wall_clock_ms": 7.0, "lagging": 1})
    s.add({"is_listen": False, "wall_clock_ms": 9.0})
    assert s.units == 3 and s.lagging == 1
    assert s.listen_ms == [5.0] and s.speak_ms == [7.0, 9.0]
    assert bench.DuplexCallerStats().listen_ms == []


def test_duplex_arguments_defaults():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    assert args.engines == ["cascade", "tiny"] and args.users == [1, 4] and args.turns == 3
    assert args.finalize == ["deferred", "inline"] and args.speed == 1.0 and args.llm == "echo"
