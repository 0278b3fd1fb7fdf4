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
