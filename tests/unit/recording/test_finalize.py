"""Finishing a recording from what is on disk: the journal read back (lines cut by a crash skipped),
and a finish that a full disk interrupts, finished again later without losing the timeline."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from omnivox.recording import finalize as finalize_module
from omnivox.recording.finalize import RECOVER_AFTER_S, finalize, read_journal, recover
from omnivox.recording.store import JOURNAL, META, TIMELINE, RecordingStore, hold_lock

from .harness import chunk, duplex, send, speak


def orphan(store: RecordingStore, session_id: str, text: str) -> Path:
    """A recording whose process died mid-session: its journal and chunks, no finish."""
    rec = duplex(store, session_id)
    send(rec, 1.0, True, chunk())
    send(rec, 1.5, False, speak(text))
    rec.flush()
    rec._release()
    rec._close_journal()
    return store.root / session_id


def assistant_texts(directory: Path) -> list[str]:
    turns = json.loads((directory / TIMELINE).read_text())["turns"]
    return [t["text"] for t in turns if t["role"] == "assistant"]


def test_journal_lines_cut_short_or_of_no_event_are_skipped(tmp_path: Path) -> None:
    lines = [
        '{"type": "text", "t": 1.0}',
        "[1, 2]",
        '{"no": "type"}',
        '{"type": 5}',
        "not json",
        '{"type": "marker", "t": 2.0}',
        '{"type": "text", "t": 3.0, "text": "cut sh',  # the crash came mid-line
    ]
    (tmp_path / JOURNAL).write_text("\n".join(lines))
    assert [e["t"] for e in read_journal(tmp_path)] == [1.0, 2.0]
    assert read_journal(tmp_path / "missing") == []


def test_a_finish_a_full_disk_interrupted_keeps_the_timeline_for_the_next_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RecordingStore(tmp_path / "sessions")
    directory = orphan(store, "full-disk", "kept through it all")
    real_write = finalize_module.write_json

    def full_at_meta(path: Path, data: dict[str, Any]) -> None:
        if path.name == META:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(finalize_module, "write_json", full_at_meta)
    fd = hold_lock(directory)
    try:
        with pytest.raises(OSError):
            finalize(directory, {"ended_at": 1.0})
    finally:
        os.close(fd)
    assert json.loads((directory / META).read_text())["status"] != "complete"
    monkeypatch.setattr(finalize_module, "write_json", real_write)
    assert recover(store, time.time() + 2 * RECOVER_AFTER_S) == ["full-disk"]  # space again: tried anew
    assert assistant_texts(directory) == ["kept through it all"]
    meta = json.loads((directory / META).read_text())
    assert meta["status"] == "complete" and meta["turns"] == 1 and isinstance(meta["bytes"], int)
    assert not (directory / JOURNAL).exists()


def test_a_finished_recording_is_counted_whole_and_loses_its_journal(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "sessions")
    directory = orphan(store, "whole", "all of it")
    meta = finalize(directory, {"ended_at": 5.0, "outcome": {"reason": "client_left"}})
    on_disk = json.loads((directory / META).read_text())
    assert on_disk == meta and meta["status"] == "complete" and meta["ended_at"] == 5.0
    assert meta["files"]["user_audio"] >= 1 and meta["files"]["ai_audio"] >= 1
    assert meta["replay"] == {"wav": True, "mp4": False} and "all of it" in meta["search_text"]
    sizes = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and p.name != META)
    assert sizes < meta["bytes"] <= sizes + (directory / META).stat().st_size
    assert not (directory / JOURNAL).exists() and assistant_texts(directory) == ["all of it"]


def test_recover_leaves_what_is_held_recent_or_finished(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "sessions")
    held = orphan(store, "held", "a")
    orphan(store, "recent", "b")
    done = orphan(store, "done", "c")
    finalize(done, {"ended_at": 1.0})
    fd = hold_lock(held)
    try:
        assert recover(store, time.time() + 2 * RECOVER_AFTER_S, grace_s=RECOVER_AFTER_S) == ["recent"]
        assert recover(store, time.time(), grace_s=RECOVER_AFTER_S) == []
    finally:
        os.close(fd)
    assert json.loads((held / META).read_text())["status"] != "complete"
    assert recover(store, time.time() + 2 * RECOVER_AFTER_S) == ["held"]
