"""--record for the load benchmarks: the gateway's environment per setting, and the figures read back
from what the recorder left in the data directory."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import pytest

from omnivox.bench import record_flag as rf


def make_recording(data_dir: Path, recording_id: str, **meta) -> Path:
    directory = data_dir / "sessions" / recording_id
    directory.mkdir(parents=True)
    (directory / "meta.json").write_text(json.dumps(meta))
    return directory


def test_the_flag_defaults_to_off_and_takes_both():
    parser = argparse.ArgumentParser()
    rf.add_record_argument(parser)
    assert parser.parse_args([]).record == ["off"]
    assert parser.parse_args(["--record", "off", "on"]).record == ["off", "on"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--record", "maybe"])


def test_record_env(tmp_path):
    on = rf.record_env("on", tmp_path)
    assert on == {
        "OMNIVOX_RECORD_SESSIONS": "true",
        "OMNIVOX_DATA_DIR": str(tmp_path),
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
    }
    assert rf.record_env("off", tmp_path)["OMNIVOX_RECORD_SESSIONS"] == "false"


def test_record_env_reads_back_as_settings(tmp_path):
    from omnivox.core.config import Settings

    env = rf.record_env("on", tmp_path)
    s = Settings(**{k.removeprefix("OMNIVOX_").lower(): v for k, v in env.items()})
    assert s.record_sessions is True and s.data_dir == tmp_path and s.record_min_free_mb == 0


def test_nothing_recorded(tmp_path):
    r = rf.recorded(tmp_path)
    assert r["sessions"] == r["complete"] == r["bytes"] == r["dropped_frames"] == 0
    assert r["minutes"] == 0 and math.isnan(r["mb_per_min"])


def test_recorded_sums_the_sessions(tmp_path):
    make_recording(tmp_path, "a", status="complete", duration_s=60, bytes=3_000_000, dropped_frames=2)
    make_recording(tmp_path, "b", status="complete", duration_s=30.0, bytes=1_500_000)
    make_recording(tmp_path, "c", status="recording")  # still going: counted, with nothing yet
    r = rf.recorded(tmp_path)
    assert r["sessions"] == 3 and r["complete"] == 2
    assert r["minutes"] == 1.5 and r["bytes"] == 4_500_000
    assert r["mb_per_min"] == 3.0 and r["dropped_frames"] == 2


def test_recorded_skips_folders_that_are_not_recordings(tmp_path):
    make_recording(tmp_path, "ok", status="complete", duration_s=6, bytes=100_000)
    (tmp_path / "sessions" / "no-meta").mkdir()
    bad = tmp_path / "sessions" / "bad-meta"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    r = rf.recorded(tmp_path)
    assert r["sessions"] == 1 and r["mb_per_min"] == 1.0


def test_cpu_seconds_of_this_process_is_a_number_and_grows():
    first = rf.cpu_seconds(os.getpid())
    sum(i * i for i in range(200_000))  # some CPU work
    assert 0 <= first <= rf.cpu_seconds(os.getpid())


def test_cpu_seconds_of_no_process_is_nan():
    assert math.isnan(rf.cpu_seconds(2**31 - 1))


def test_wait_finished_returns_when_every_recording_is_complete(tmp_path):
    make_recording(tmp_path, "a", status="complete")
    rf.wait_finished(tmp_path, timeout_s=30)  # returns at once


def test_wait_finished_on_an_empty_folder_returns(tmp_path):
    rf.wait_finished(tmp_path / "nothing-here", timeout_s=30)


def test_wait_finished_gives_up_when_time_is_up(tmp_path):
    make_recording(tmp_path, "a", status="recording")
    rf.wait_finished(tmp_path, timeout_s=0)  # returns without raising
