"""Retention: by age, then by size (least recently used first), never a recording being made."""

from __future__ import annotations

import json
import os

import pytest

from omnivox.recording.cleanup import cleanup
from omnivox.recording.finalize import RECOVER_AFTER_S
from omnivox.recording.store import RecordingStore, hold_lock

DAY = 86400.0
NOW = 1_800_000_000.0
MB = 2**20


def make(
    root, rid, *, ended_days_ago=None, started_days_ago=1.0, size_mb=1, used_days_ago=None, complete=True
):
    d = root / rid
    (d / "user_audio").mkdir(parents=True)
    (d / "user_audio" / "000001.wav").write_bytes(b"\0" * (size_mb * MB))
    meta = {
        "recording_id": rid,
        "started_at": NOW - started_days_ago * DAY,
        "status": "complete" if complete else "recording",
    }
    if complete:
        meta |= {
            "ended_at": NOW - (ended_days_ago if ended_days_ago is not None else started_days_ago) * DAY,
            "bytes": size_mb * MB,
        }
    (d / "meta.json").write_text(json.dumps(meta))
    for name in ("meta.json",):
        os.utime(d / name, (NOW - started_days_ago * DAY,) * 2)
    if used_days_ago is not None:
        (d / ".used").touch()
        os.utime(d / ".used", (NOW - used_days_ago * DAY,) * 2)
    return d


@pytest.fixture
def store(tmp_path):
    return RecordingStore(tmp_path / "sessions")


def ids(report):
    return sorted(r.recording_id for r in report.removed)


def test_by_age(store):
    for rid, age in (("old", 40), ("new", 2), ("edge", 30)):
        make(store.root, rid, started_days_ago=age)
    report = cleanup(store, retention_days=30, max_storage_gb=None, now=NOW)
    assert ids(report) == ["edge", "old"] and {r.reason for r in report.removed} == {"age"}
    assert sorted(p.name for p in store.root.iterdir()) == ["new"]
    assert report.kept == 1 and report.bytes_after == MB
    assert cleanup(store, retention_days=0, max_storage_gb=None, now=NOW).removed[0].recording_id == "new"


def test_by_size_the_least_recently_used_go_first(store):
    make(store.root, "a", started_days_ago=5, size_mb=3)
    make(store.root, "b", started_days_ago=4, size_mb=3, used_days_ago=0.1)  # replayed lately
    make(store.root, "c", started_days_ago=3, size_mb=3)
    report = cleanup(store, retention_days=None, max_storage_gb=6.5 * MB / 2**30, now=NOW)
    assert ids(report) == ["a"] and report.removed[0].reason == "size"
    report = cleanup(store, retention_days=None, max_storage_gb=3.5 * MB / 2**30, now=NOW)
    assert ids(report) == ["c"]  # b was used more recently than c was made


def test_dry_run_removes_nothing_and_says_what_it_would(store):
    make(store.root, "old", started_days_ago=40)
    report = cleanup(store, retention_days=30, max_storage_gb=None, now=NOW, dry_run=True)
    assert ids(report) == ["old"] and (store.root / "old").is_dir()
    assert report.lines()[0].startswith("would remove old (age; 1.0 MiB; started ")


def test_a_recording_being_made_is_never_removed(store):
    make(store.root, "old", started_days_ago=40)
    live = make(store.root, "live", started_days_ago=40, size_mb=5, complete=False)
    os.utime(live / "meta.json", (NOW - 40 * DAY,) * 2)
    fd = hold_lock(live)
    try:
        report = cleanup(store, retention_days=0, max_storage_gb=0, now=NOW)
    finally:
        os.close(fd)
    assert ids(report) == ["old"] and report.live == ["live"] and (live / "meta.json").is_file()
    # by the live set of this process too, and an unfinished one that wrote something lately
    report = cleanup(store, retention_days=0, max_storage_gb=0, now=NOW, live={"live"})
    assert report.removed == [] and report.live == ["live"]
    os.utime(live / "meta.json", (NOW - RECOVER_AFTER_S / 2,) * 2)
    assert cleanup(store, retention_days=0, max_storage_gb=0, now=NOW).removed == []
    # quiet for long and nobody holds it: its process died; cleanup may take it
    os.utime(live / "meta.json", (NOW - 2 * RECOVER_AFTER_S,) * 2)
    assert ids(cleanup(store, retention_days=0, max_storage_gb=None, now=NOW)) == ["live"]


def test_leftovers_are_swept(store):
    make(store.root, "ok", started_days_ago=1)
    (store.root / ".deleting-x-1" / "user_audio").mkdir(parents=True)
    stray = store.root / "no-meta"
    stray.mkdir()
    os.utime(stray, (NOW - 2 * RECOVER_AFTER_S,) * 2)
    fresh = store.root / "fresh-no-meta"
    fresh.mkdir()
    os.utime(fresh, (NOW,) * 2)
    cleanup(store, retention_days=30, max_storage_gb=None, now=NOW)
    assert sorted(p.name for p in store.root.iterdir()) == ["fresh-no-meta", "ok"]


def test_an_empty_or_missing_folder_is_fine(store):
    report = cleanup(store, retention_days=0, max_storage_gb=0, now=NOW)
    assert report.removed == [] and report.lines()[-1].startswith("removed 0 recording(s)")


def test_what_age_removes_counts_before_size_is_weighed(store):
    make(store.root, "old", started_days_ago=40, size_mb=4)
    make(store.root, "mid", started_days_ago=5, size_mb=2)
    make(store.root, "new", started_days_ago=1, size_mb=2)
    report = cleanup(store, retention_days=30, max_storage_gb=4.5 * MB / 2**30, now=NOW)
    assert [(r.recording_id, r.reason) for r in report.removed] == [("old", "age")]  # 4 MiB left: enough
    assert (report.bytes_before, report.bytes_after, report.kept) == (8 * MB, 4 * MB, 2)


def test_a_dry_run_sweeps_nothing_either(store):
    stray = store.root / "no-meta"
    stray.mkdir(parents=True)
    os.utime(stray, (NOW - 2 * RECOVER_AFTER_S,) * 2)
    (store.root / ".deleting-x-1").mkdir()
    cleanup(store, retention_days=0, max_storage_gb=0, now=NOW, dry_run=True)
    assert sorted(p.name for p in store.root.iterdir()) == [".deleting-x-1", "no-meta"]


def test_a_recording_removed_meanwhile_is_not_reported_removed(store, monkeypatch):
    make(store.root, "gone", started_days_ago=40)
    real_delete = store.delete

    def raced(recording_id):
        real_delete(recording_id)  # another cleanup or a DELETE got there first
        real_delete(recording_id)

    monkeypatch.setattr(store, "delete", raced)
    report = cleanup(store, retention_days=30, max_storage_gb=None, now=NOW)
    assert report.removed == [] and report.live == [] and not (store.root / "gone").exists()


def test_an_unfinished_recording_is_sized_from_the_disk_not_its_meta(store):
    d = make(store.root, "orphan", started_days_ago=40, size_mb=2, complete=False)
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({**meta, "bytes": 1}))  # a figure only a finish writes
    os.utime(d / "meta.json", (NOW - 40 * DAY,) * 2)
    report = cleanup(store, retention_days=30, max_storage_gb=None, now=NOW)
    assert [r.recording_id for r in report.removed] == ["orphan"] and report.removed[0].bytes >= 2 * MB
    assert report.lines()[0].startswith("removed orphan (age; 2.0 MiB; started ")
