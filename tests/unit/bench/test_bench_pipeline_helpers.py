"""bench realtime --pipeline: the spec it writes (slots raised to the callers), the ASR batch and the
stage pids read off a pipeline view; bench duplex's row; bench pipeline's arguments."""

from __future__ import annotations

import argparse
import math
import tempfile

from omnivox.bench import duplex as bench_duplex
from omnivox.bench import realtime_pipeline as rp
from omnivox.pipeline.spec import load_spec


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    rp.add_pipeline_arguments(parser)
    return parser.parse_args(list(argv))


def slots(path: str) -> dict[str, int]:
    return {s.name: s.slots for s in load_spec(path).stages}


def test_pipeline_arguments_default_to_none():
    args = parse()
    assert args.pipeline is None and args.slots is None and args.llm_slots is None


def test_pipeline_arguments_parse_ints():
    args = parse("--pipeline", "cascade", "--slots", "3", "--llm-slots", "5")
    assert (args.pipeline, args.slots, args.llm_slots) == ("cascade", 3, 5)


def test_streaming_slots_are_raised_to_the_callers(tmp_path):
    before = slots("cascade")
    path = rp.pipeline_spec(parse("--pipeline", "cascade"), 20, tmp_path)
    assert path == str(tmp_path / "cascade-20.toml")
    after = slots(path)
    assert after["asr"] == 20 and after["tts"] == 20
    assert after["llm"] == before["llm"]  # not a streaming stage


def test_streaming_slots_are_never_lowered(tmp_path):
    before = slots("cascade")
    after = slots(rp.pipeline_spec(parse("--pipeline", "cascade"), 1, tmp_path))
    assert after["asr"] == before["asr"] and after["tts"] == before["tts"]


def test_slots_set_the_streaming_stages_whatever_the_callers(tmp_path):
    after = slots(rp.pipeline_spec(parse("--pipeline", "cascade", "--slots", "2"), 50, tmp_path))
    assert after["asr"] == 2 and after["tts"] == 2


def test_llm_slots_set_the_llm_stage(tmp_path):
    after = slots(rp.pipeline_spec(parse("--pipeline", "cascade", "--llm-slots", "3"), 4, tmp_path))
    assert after["llm"] == 3


def test_without_a_log_dir_the_spec_goes_to_a_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = rp.pipeline_spec(parse("--pipeline", "cascade"), 2, None)
    assert path.startswith(str(tmp_path / "omnivox-bench-")) and path.endswith("cascade-2.toml")
    assert slots(path)["asr"] >= 2


def test_asr_batch_reads_the_first_stage_that_decoded():
    view = {
        "stages": [
            {"name": "llm", "load": {}},
            {"name": "asr", "load": {"decode_calls": 4, "decode_items": 10, "decode_max_batch": 5.0}},
            {"name": "asr2", "load": {"decode_calls": 1, "decode_items": 1, "decode_max_batch": 1}},
        ]
    }
    assert rp.asr_batch(view) == "2.50 (max 5)"


def test_asr_batch_without_decodes_is_a_dash():
    assert rp.asr_batch({}) == "–"
    assert rp.asr_batch({"stages": []}) == "–"
    assert rp.asr_batch({"stages": [{"name": "asr"}, {"load": {"decode_calls": 0}}]}) == "–"


def test_stage_pids_skip_stages_without_one():
    view = {"stages": [{"pid": 12}, {"pid": None}, {}, {"pid": "34"}, {"pid": 0}]}
    assert rp.stage_pids(view) == [12, 34]
    assert rp.stage_pids({}) == []


# ---- bench duplex


def test_duplex_summary_of_nothing():
    r = bench_duplex.summarize([])
    assert r["units"] == 0 and r["speak_units"] == 0 and r["lagging"] == 0 and r["replies"] == 0
    assert math.isnan(r["listen_p50_ms"]) and math.isnan(r["first_speak_p95_ms"])
    assert r["errors"] == []


def test_duplex_row_without_a_recording_or_cpu():
    r = bench_duplex.summarize([bench_duplex.DuplexCallerStats()])
    row = bench_duplex.row("tiny", 1, "inline", r)
    assert len(row) == len(bench_duplex.COLUMNS)
    assert row[:4] == ["tiny", 1, "inline", "off"]
    assert math.isnan(row[-2]) and row[-1] == "-"


def test_duplex_row_with_a_recording_and_cpu():
    r = {**bench_duplex.summarize([]), "gateway_cpu_pct": 12.5, "recorded": {"mb_per_min": 1.25}}
    row = bench_duplex.row("cascade", 4, "deferred", r, record="on")
    assert row[3] == "on" and row[-2] == 12.5 and row[-1] == 1.25


def test_caller_stats_count_units_lagging_and_split_the_walls():
    s = bench_duplex.DuplexCallerStats()
    s.add({"is_listen": True, "wall_clock_ms": 5.0, "lagging": False})
    s.add({"is_listen": False, "wall_clock_ms": 7.0, "lagging": 1})
    s.add({"is_listen": False, "wall_clock_ms": 9.0})
    assert s.units == 3 and s.lagging == 1
    assert s.listen_ms == [5.0] and s.speak_ms == [7.0, 9.0]
    assert bench_duplex.DuplexCallerStats().listen_ms == []


def test_duplex_arguments_defaults():
    parser = argparse.ArgumentParser()
    bench_duplex.add_arguments(parser)
    args = parser.parse_args([])
    assert args.engines == ["cascade", "tiny"] and args.users == [1, 4] and args.turns == 3
    assert args.finalize == ["deferred", "inline"] and args.speed == 1.0 and args.llm == "echo"
