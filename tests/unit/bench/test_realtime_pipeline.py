"""bench realtime --pipeline: the spec it writes (slots raised to the callers), the ASR batch and the
stage pids read off a pipeline view."""

from __future__ import annotations

import argparse
import tempfile

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


VIEW = {
    "stages": [
        {
            "name": "asr",
            "pid": 11,
            "load": {
                "final_decode_s": 2.5,
                "partial_decode_s": 1.0,
                "finals": 6.0,
                "partials": 4.0,
                "decode_calls": 7.0,
                "decode_items": 10.0,
            },
        },
        {"name": "llm", "pid": 12, "load": {}},
        {"name": "tts", "pid": None, "load": {}},
    ]
}


def test_components_name_the_gateway_the_workers_the_coordinator_and_each_running_stage():
    parts = rp.component_pids(1, [2, 3], 4, VIEW)
    assert parts == {
        "gateway": [1],
        "workers": [2, 3],
        "coordinator": [4],
        "stage asr": [11],
        "stage llm": [12],
    }
    assert rp.component_pids(1, [2], None, {}) == {"gateway": [1], "workers": [2]}


def test_cpu_of_a_component_is_the_sum_of_its_processes(monkeypatch):
    seconds = {1: 1.0, 2: 2.0, 3: 3.5}
    monkeypatch.setattr("omnivox.bench.record_flag.cpu_seconds", lambda pid: seconds[pid])
    assert rp.cpu_by_component({"gateway": [1], "workers": [2, 3]}) == {"gateway": 1.0, "workers": 5.5}


def test_cpu_shares_are_percent_of_a_core_per_session():
    before, after = {"gateway": 1.0, "workers": 5.0}, {"gateway": 3.0, "workers": 13.0, "late": 9.0}
    shares = rp.cpu_shares(before, after, wall_s=10.0, users=4)
    assert shares == {"gateway": 5.0, "workers": 20.0}  # 2 s / 10 s / 4 callers; 8 s / 10 s / 4


def test_the_asr_split_reads_finals_and_partials_of_the_asr_stage():
    split = rp.asr_split(VIEW)
    assert split["final_decode_s"] == 2.5 and split["partials"] == 4.0
    assert rp.asr_split({"stages": [{"name": "asr", "load": {"decode_calls": 1.0}}]}) == {}
