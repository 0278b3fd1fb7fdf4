"""Listing recordings (newest first, by kind, by transcript text, in pages with a cursor), one
recording's summary, and its detail while it is still being made and once finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivox.core.errors import InvalidCursor, NotFound
from omnivox.gateway.http.recordings import _detail, _list, _summary
from omnivox.recording.store import RecordingStore, encode_cursor


@pytest.fixture
def store(tmp_path: Path) -> RecordingStore:
    return RecordingStore.under(tmp_path)


def add(store: RecordingStore, recording_id: str, **meta) -> Path:
    directory = store.root / recording_id
    directory.mkdir(parents=True)
    (directory / "meta.json").write_text(json.dumps(meta))
    return directory


def ids(page: dict) -> list[str]:
    return [r["session_id"] for r in page["recordings"]]


# ---- listing


def test_an_empty_store_lists_nothing(store):
    assert _list(store, set(), None, None, 50, None) == {"recordings": [], "next_cursor": None}


def test_newest_first_and_ties_broken_by_id(store):
    add(store, "old", started_at=100.0, status="complete")
    add(store, "new", started_at=300.0, status="complete")
    add(store, "mid-a", started_at=200.0, status="complete")
    add(store, "mid-b", started_at=200.0, status="complete")
    assert ids(_list(store, set(), None, None, 50, None)) == ["new", "mid-b", "mid-a", "old"]


def test_filter_by_kind_or_task_type(store):
    add(store, "r", started_at=1.0, kind="realtime", task_type="realtime")
    add(store, "d", started_at=2.0, kind="duplex", task_type="omni_duplex")
    add(store, "s", started_at=3.0, kind="streaming", task_type="streaming")
    assert ids(_list(store, set(), "duplex", None, 50, None)) == ["d"]
    assert ids(_list(store, set(), "omni_duplex", None, 50, None)) == ["d"]
    assert ids(_list(store, set(), "nothing", None, 50, None)) == []


def test_search_is_case_insensitive_in_the_transcripts(store):
    add(store, "a", started_at=1.0, search_text="What is the WEATHER in Paris")
    add(store, "b", started_at=2.0, search_text="tell me a story")
    add(store, "c", started_at=3.0)  # nothing said yet
    assert ids(_list(store, set(), None, "weather", 50, None)) == ["a"]
    assert ids(_list(store, set(), None, "STORY", 50, None)) == ["b"]
    assert ids(_list(store, set(), None, "pizza", 50, None)) == []


def test_pages_follow_the_cursor_to_the_end(store):
    for i in range(5):
        add(store, f"rec{i}", started_at=float(i), status="complete")
    seen, cursor = [], None
    for _ in range(10):
        page = _list(store, set(), None, None, 2, cursor)
        seen += ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["rec4", "rec3", "rec2", "rec1", "rec0"]


def test_a_page_that_holds_the_rest_has_no_cursor(store):
    for i in range(3):
        add(store, f"r{i}", started_at=float(i))
    assert _list(store, set(), None, None, 3, None)["next_cursor"] is None
    assert _list(store, set(), None, None, 2, None)["next_cursor"] == encode_cursor(1.0, "r1")


def test_a_cursor_past_everything_gives_an_empty_page(store):
    add(store, "r", started_at=5.0)
    page = _list(store, set(), None, None, 10, encode_cursor(0.0, "a"))
    assert page == {"recordings": [], "next_cursor": None}


def test_a_forged_cursor_is_refused(store):
    add(store, "r", started_at=5.0)
    with pytest.raises(InvalidCursor):
        _list(store, set(), None, None, 10, "not-a-cursor!!")


# ---- summaries


def test_a_finished_recording_s_summary_comes_from_its_meta(store):
    add(
        store,
        "done",
        session_id="client-id",
        kind="realtime",
        task_type="realtime",
        status="complete",
        started_at=1000.0,
        duration_s=42.5,
        turns=3,
        bytes=12345,
        outcome={"reason": "client_closed"},
        barge_ins=1,
        replay={"wav": True, "mp4": False},
    )
    (entry,) = store.entries()
    s = _summary(store, entry, set(), now=5000.0)
    assert s == {
        "session_id": "done",
        "client_session_id": "client-id",
        "kind": "realtime",
        "task_type": "realtime",
        "status": "complete",
        "live": False,
        "started_at": 1000.0,
        "duration_s": 42.5,
        "turns": 3,
        "bytes": 12345,
        "outcome": "client_closed",
        "barge_ins": 1,
        "replay": {"wav": True, "mp4": False},
    }


def test_a_recording_still_being_made_counts_its_own_time_and_bytes(store):
    directory = add(store, "going", started_at=1000.0, status="recording", bytes=1)
    (directory / "user_audio").mkdir()
    (directory / "user_audio" / "000001.wav").write_bytes(b"x" * 500)
    (entry,) = store.entries()
    s = _summary(store, entry, {"going"}, now=1012.3456)
    assert s["status"] == "recording" and s["live"] is True
    assert s["duration_s"] == 12.346  # from its start until now
    assert s["bytes"] == 500 + len((directory / "meta.json").read_bytes())  # what is on disk
    assert s["outcome"] is None and s["turns"] == 0 and s["replay"] == {"wav": False, "mp4": False}


def test_an_unfinished_recording_nobody_holds_is_not_live(store):
    add(store, "crashed", started_at=1.0, status="recording")
    (entry,) = store.entries()
    assert _summary(store, entry, set(), now=2.0)["live"] is False


def test_a_recording_held_by_a_lock_is_live(store):
    import os

    from omnivox.recording.store import hold_lock

    directory = add(store, "locked", started_at=1.0, status="recording")
    fd = hold_lock(directory)
    try:
        (entry,) = store.entries()
        assert _summary(store, entry, set(), now=2.0)["live"] is True
    finally:
        os.close(fd)


# ---- detail


def test_detail_of_a_finished_recording(store):
    directory = add(store, "fin", started_at=1.0, status="complete", search_text="hidden words")
    timeline = {"events": [], "turns": [], "duration_s": 3.0}
    (directory / "recording.json").write_text(json.dumps(timeline))
    (directory / "merged_replay.wav").write_bytes(b"RIFF")
    d = _detail(store, "fin", set())
    assert "search_text" not in d["meta"] and d["meta"]["status"] == "complete"
    assert d["timeline"] == timeline and d["live"] is False
    assert d["media"] == {"wav": True, "mp4": False}
    assert (directory / ".used").exists()  # reading it counts as a use


def test_detail_of_a_recording_in_progress_reads_its_journal(store):
    directory = add(store, "live1", started_at=1.0, status="recording")
    lines = [
        json.dumps({"type": "session_update", "t": 0.5}),
        "{half a line",
        json.dumps({"type": "session_update", "t": 2.25}),
    ]
    (directory / "timeline.jsonl").write_text("\n".join(lines) + "\n")
    d = _detail(store, "live1", {"live1"})
    assert [e["t"] for e in d["timeline"]["events"]] == [0.5, 2.25]  # the broken line is skipped
    assert d["timeline"]["duration_s"] == 2.25 and d["timeline"]["turns"] == []
    assert d["live"] is True and d["media"] == {"wav": False, "mp4": False}


def test_detail_of_a_recording_with_no_journal_yet(store):
    add(store, "new", started_at=1.0, status="recording")
    timeline = _detail(store, "new", set())["timeline"]
    assert timeline == {"events": [], "turns": [], "duration_s": 0.0}


@pytest.mark.parametrize("recording_id", ["missing", "../etc", "..", "a/b", ""])
def test_detail_of_nothing_is_not_found(store, recording_id):
    store.root.mkdir(parents=True)
    with pytest.raises(NotFound):
        _detail(store, recording_id, set())


def test_detail_of_a_folder_without_meta_is_not_found(store):
    (store.root / "bare").mkdir(parents=True)
    with pytest.raises(NotFound):
        _detail(store, "bare", set())
