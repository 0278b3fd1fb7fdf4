"""Recording ids and file paths are checked before any path is built; locks say what is live."""

from __future__ import annotations

import base64
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omnivox.core.errors import InvalidCursor, NotFound, RecordingBusy
from omnivox.recording.store import (
    RecordingStore,
    check_file,
    check_recording_id,
    decode_cursor,
    encode_cursor,
    hold_lock,
    read_json,
    remove_tree,
    write_json,
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


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "forged",
    [
        _b64("[" * 5000 + "]" * 5000),  # nested past the parser's recursion limit
        _b64('[1, "a", 3]'),
        _b64('{"a": 1}'),
        _b64('["x", "rec-1"]'),
        _b64('[[1], "rec-1"]'),
        _b64("[1, "),
        base64.urlsafe_b64encode(b"\xff\xfe[1]").decode(),  # not UTF-8
        "é",
        "!!!!",
        "A",
    ],
)
def test_forged_cursors_are_invalid_cursor_never_another_error(forged):
    with pytest.raises(InvalidCursor) as err:
        decode_cursor(forged)
    assert (err.value.code, err.value.http_status) == ("invalid_cursor", 400)


def test_only_directories_with_a_readable_meta_are_entries(tmp_path):
    store = RecordingStore(tmp_path)
    assert RecordingStore(tmp_path / "none").entries() == []
    for rid, meta in (("ok", '{"started_at": 5}'), ("list", "[1]"), ("cut", '{"started_'), (".hidden", "{}")):
        (tmp_path / rid).mkdir()
        (tmp_path / rid / "meta.json").write_text(meta)
    (tmp_path / "no-meta").mkdir()
    (tmp_path / "file.json").write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "ok")
    entries = store.entries()
    assert [e.recording_id for e in entries] == ["ok"] and entries[0].started_at == 5.0
    with pytest.raises(NotFound):
        store.meta("cut")
    with pytest.raises(NotFound):
        store.meta("link")
    assert store.timeline("ok") is None  # still recording: no recording.json yet


def test_the_journal_of_a_live_recording_skips_a_line_cut_short(tmp_path):
    store = RecordingStore(tmp_path)
    (tmp_path / "r1").mkdir()
    assert store.journal("r1") == []
    (tmp_path / "r1" / "timeline.jsonl").write_text('{"t": 1}\n{"t": 2}\n{"t": 3, "te')
    assert store.journal("r1") == [{"t": 1}, {"t": 2}]


def test_write_json_replaces_the_file_whole(tmp_path):
    target = tmp_path / "meta.json"
    write_json(target, {"a": "é"})
    write_json(target, {"b": 2})
    assert read_json(target) == {"b": 2} and sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]
    assert read_json(tmp_path / "missing.json") is None


def test_deleting_what_is_not_there_is_not_found(tmp_path):
    store = RecordingStore(tmp_path)
    with pytest.raises(NotFound) as err:
        store.delete("nothing")
    assert err.value.http_status == 404
    remove_tree(tmp_path / "nothing")  # already gone: nothing to do


def test_a_write_the_disk_cuts_short_keeps_the_old_file_and_leaves_no_half(tmp_path, monkeypatch):
    target = tmp_path / "meta.json"
    write_json(target, {"status": "recording"})
    real_write = Path.write_text

    def full(self, text, *args, **kwargs):
        real_write(self, text[:5], *args, **kwargs)  # what fitted
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError):
        write_json(target, {"status": "complete"})
    monkeypatch.undo()
    assert read_json(target) == {"status": "recording"} and [p.name for p in tmp_path.iterdir()] == [
        "meta.json"
    ]
