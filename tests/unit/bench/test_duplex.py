"""bench duplex: its figures from results, and one short run against a real cluster."""

from __future__ import annotations

import argparse
import json

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
