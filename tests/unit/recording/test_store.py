"""Recording ids and file paths are checked before any path is built; locks say what is live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from omnivox.core.errors import InvalidCursor, NotFound, RecordingBusy
from omnivox.recording.store import (
    RecordingStore,
    check_file,
    check_recording_id,
    decode_cursor,
    encode_cursor,
    hold_lock,
)

TRAVERSALS = [
    "..",
    ".",
    "../etc",
    "a/../../b",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "%2e%2e",
    "..%2F",
    "",
    ".hidden",
    "-flag",
    "a\x00b",
    "x" * 129,
    "a..b",
]


@pytest.mark.parametrize("bad", TRAVERSALS)
def test_ids_that_could_name_another_place_name_nothing(bad, tmp_path):
    with pytest.raises(NotFound):
        check_recording_id(bad)
    with pytest.raises(NotFound):
        RecordingStore(tmp_path).dir_of(bad)


def test_session_ids_are_recording_ids():
    for good in ("rec-1", "omni_abc", "re_0123456789abcdef", "a.b:c-d_e", "s.2", "x" * 128):
        assert check_recording_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "../meta.json",
        "user_audio/../../x.wav",
        "/etc/passwd",
        "user_audio//x.wav",
        "other/x.wav",
        "user_audio/.x.wav",
        "user_audio/x",
        ".lock",
        ".used",
        "user_audio\\x.wav",
        "user_audio/x.wav/",
        "user_audio/sub/x.wav",
        "x.WAV",
    ],
)
def test_file_paths_outside_the_known_folders_name_nothing(bad):
    with pytest.raises(NotFound):
        check_file(bad)


def test_only_regular_files_inside_are_served(tmp_path):
    store = RecordingStore(tmp_path)
    (tmp_path / "r1" / "user_audio").mkdir(parents=True)
    (tmp_path / "r1" / "user_audio" / "000001.wav").write_bytes(b"RIFF")
    (tmp_path / "outside.wav").write_bytes(b"secret")
    (tmp_path / "r1" / "user_audio" / "link.wav").symlink_to(tmp_path / "outside.wav")
    (tmp_path / "r2").symlink_to(tmp_path / "r1")
    assert store.file_of("r1", "user_audio/000001.wav").read_bytes() == b"RIFF"
    for rid, path in (
        ("r1", "user_audio/link.wav"),
        ("r2", "user_audio/000001.wav"),
        ("r1", "user_audio/none.wav"),
    ):
        with pytest.raises(NotFound):
            store.file_of(rid, path)
    with pytest.raises(NotFound):
        store.file_of("r1", "user_audio")  # a folder


def test_a_lock_held_by_another_process_makes_a_recording_live(tmp_path):
    store = RecordingStore(tmp_path)
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "meta.json").write_text(json.dumps({"started_at": 1.0}))
    assert not store.is_live(tmp_path / "r1")  # never locked
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from omnivox.recording.store import hold_lock
            hold_lock(__import__("pathlib").Path({str(tmp_path / "r1")!r}))
            print("held", flush=True)
            time.sleep(30)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert store.is_live(tmp_path / "r1")
        with pytest.raises(RecordingBusy):
            store.delete("r1")
        assert (tmp_path / "r1").is_dir()
    finally:
        holder.kill()
        holder.wait()
    assert not store.is_live(tmp_path / "r1")  # the lock went with its process
    store.delete("r1")
    assert not (tmp_path / "r1").exists() and list(tmp_path.iterdir()) == []


def test_a_lock_in_this_process_counts_too(tmp_path):
    (tmp_path / "r1").mkdir()
    fd = hold_lock(tmp_path / "r1")
    try:
        assert RecordingStore(tmp_path).is_live(tmp_path / "r1")
    finally:
        os.close(fd)
    assert not RecordingStore(tmp_path).is_live(tmp_path / "r1")


def test_cursors_round_trip_and_forged_ones_are_refused():
    assert decode_cursor(encode_cursor(12.5, "rec-1")) == (12.5, "rec-1")
    for bad in ("", "nonsense", "W10", "bnVsbA"):
        with pytest.raises(InvalidCursor):
            decode_cursor(bad)
