"""One session's recording: when it starts, what opting in and out do, failures, the end."""

from __future__ import annotations

import errno
import json
import time
import wave

import pytest

from omnivox.protocol.registry import by_name
from omnivox.recording.finalize import recover
from omnivox.recording.session import Outcome, Policy, RecordedSession, SessionRecording
from omnivox.recording.store import JOURNAL, RecordingStore

from .harness import chunk, duplex, send, speak


@pytest.fixture
def store(tmp_path):
    return RecordingStore(tmp_path / "sessions")


def test_nothing_touches_the_disk_before_there_is_something_to_keep(store):
    rec = duplex(store)
    send(rec, 0.1, True, {"type": "prepare", "system_prompt": "be kind"})
    send(
        rec,
        0.2,
        False,
        {
            "type": "prepared",
            "session_id": "dx-1",
            "mode": "audio",
            "config": {},
            "deferred_finalize": True,
            "vision": False,
        },
    )
    assert not store.root.exists()
    send(rec, 1.0, True, chunk())
    assert (store.root / "dx-1" / "meta.json").is_file()
    send(rec, 1.1, False, speak())
    rec.finish(Outcome(1000))
    meta = json.loads((store.root / "dx-1" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["config"]["system_prompt"] == "be kind"
    assert meta["config"]["mode"] == "audio" and meta["outcome"]["reason"] == "closed"
    assert not (store.root / "dx-1" / JOURNAL).exists() and not (store.root / "dx-1" / ".lock").exists()
    with wave.open(str(store.root / "dx-1" / "user_audio" / "000001.wav")) as w:
        assert (w.getframerate(), w.getnframes()) == (16000, 16000)


def test_a_session_with_nothing_to_keep_leaves_nothing(store):
    rec = duplex(store)
    send(rec, 0.1, True, {"type": "prepare"})
    send(rec, 0.3, True, {"type": "stop"})
    rec.finish(Outcome(1000))
    assert not store.root.exists()


def test_opting_out_at_any_time_removes_everything(store):
    early = duplex(store, "early")
    send(early, 0.1, True, {"type": "prepare", "record": False})
    send(early, 1.0, True, chunk())
    early.finish(Outcome(1000))
    late = duplex(store, "late")
    send(late, 1.0, True, chunk())
    send(late, 1.1, False, speak())
    assert (store.root / "late" / "user_audio").is_dir()
    late.frame(101.5, True, json.dumps({"type": "prepare", "record": False}))  # (a reader's RecordChoice)
    send(late, 2.0, True, chunk())
    late.finish(Outcome(1000))
    assert list(store.root.iterdir()) == []
    # a yes after a no changes nothing
    again = duplex(store, "again", Policy(True, allow_opt_in=True))
    send(again, 0.1, True, {"type": "prepare", "record": False})
    send(again, 0.2, True, {"type": "prepare", "record": True})
    send(again, 1.0, True, chunk())
    again.finish(Outcome(1000))
    assert list(store.root.iterdir()) == []


def test_what_the_server_allows_decides(store):
    forced = duplex(store, "forced", Policy(True, allow_opt_out=False))
    send(forced, 1.0, True, chunk())
    send(forced, 1.1, True, {"type": "prepare", "record": False})
    forced.finish(Outcome(1000))
    meta = json.loads((store.root / "forced" / "meta.json").read_text())
    assert meta["record_refused"] == ["opt_out"]
    events = json.loads((store.root / "forced" / "recording.json").read_text())["events"]
    assert any(e.get("name") == "record_opt_out_refused" for e in events)
    for rid, policy, asked in (
        ("no", Policy(False), True),
        ("yes", Policy(False, allow_opt_in=True), True),
        ("off", Policy(False, allow_opt_in=True), None),
    ):
        rec = duplex(store, rid, policy)
        send(rec, 0.1, True, {"type": "prepare", **({"record": asked} if asked is not None else {})})
        send(rec, 1.0, True, chunk())
        rec.finish(Outcome(1000))
    assert sorted(p.name for p in store.root.iterdir()) == ["forced", "yes"]


def test_a_reused_session_id_gets_its_own_recording(store):
    for _ in range(3):
        rec = duplex(store, "same")
        send(rec, 1.0, True, chunk())
        rec.finish(Outcome(1000))
        assert rec.recording_id is not None
    assert sorted(p.name for p in store.root.iterdir()) == ["same", "same.2", "same.3"]
    assert json.loads((store.root / "same.3" / "meta.json").read_text())["session_id"] == "same"


def test_a_failing_disk_stops_the_recording_once_and_the_session_never_notices(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    failures = []
    rec = duplex(
        RecordingStore(blocker / "sessions"), on_failure=lambda rid, why: failures.append((rid, why))
    )
    for i in range(5):
        send(rec, 1.0 + i, True, chunk())
    rec.finish(Outcome(1000))
    assert len(failures) == 1 and failures[0][0] == "dx-1" and isinstance(failures[0][1], OSError)
    full = []
    rec = duplex(
        RecordingStore(tmp_path / "s"),
        policy=Policy(True, min_free_bytes=2**60),
        on_failure=lambda *a: full.append(a),
    )
    send(rec, 1.0, True, chunk())
    assert len(full) == 1 and not (tmp_path / "s" / "dx-1").exists()
    # an id that could name another place is never a directory
    bad = []
    rec = duplex(RecordingStore(tmp_path / "t"), session_id="../escape", on_failure=lambda *a: bad.append(a))
    send(rec, 1.0, True, chunk())
    rec.finish(Outcome(1000))
    assert len(bad) == 1 and not (tmp_path / "escape").exists() and list((tmp_path / "t").iterdir()) == []


def test_a_recording_whose_process_died_is_finished_later(store):
    rec = duplex(store, "orphan")
    send(rec, 1.0, True, chunk())
    send(rec, 1.5, False, speak("left behind"))
    rec.flush()
    rec._release()  # the process dies: its lock goes, finish never runs
    rec._close_journal()
    assert recover(store, time.time()) == []  # too recent: it may be alive elsewhere
    assert recover(store, time.time() + 3600) == ["orphan"]
    meta = json.loads((store.root / "orphan" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["outcome"]["reason"] == "recorder_stopped"
    turns = json.loads((store.root / "orphan" / "recording.json").read_text())["turns"]
    assert [t["text"] for t in turns if t["role"] == "assistant"] == ["left behind"]
    assert (store.root / "orphan" / "merged_replay.wav").is_file()


def test_the_client_address_is_kept_only_when_asked(store):
    info = RecordedSession("addr", "duplex", "audio_duplex", time.time(), 100.0, client_address="203.0.113.9")
    rec = SessionRecording(store, info, by_name("duplex").timeline_reader(), Policy(True))
    send(rec, 1.0, True, chunk())
    rec.finish(Outcome(1000))
    assert json.loads((store.root / "addr" / "meta.json").read_text())["client_address"] == "203.0.113.9"


class _FullDisk:
    """A file on a disk that fills up after ``room`` bytes: the write keeps what fitted, then fails."""

    def __init__(self, path, mode, room):
        self.f = open(path, mode)  # closed by __exit__
        self.room = room

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        self.f.write(data[: self.room])
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_disk_that_fills_up_mid_session_stops_the_recording_once_and_leaves_no_half_file(
    store, monkeypatch
):
    from omnivox.recording import session as session_module

    failures = []
    rec = duplex(store, "full", on_failure=lambda rid, why: failures.append((rid, why)))
    send(rec, 1.0, True, chunk())  # the first second is written whole
    directory = store.root / "full"
    assert (directory / "user_audio" / "000001.wav").is_file()
    monkeypatch.setattr(session_module, "open", lambda p, m="r", **kw: _FullDisk(p, m, 1000), raising=False)
    for i in range(3):
        send(rec, 2.0 + i, True, chunk())  # never raises into the session
    monkeypatch.undo()
    assert len(failures) == 1 and failures[0][0] == "full" and failures[0][1].errno == errno.ENOSPC
    assert rec.failed
    assert sorted(p.name for p in (directory / "user_audio").iterdir()) == ["000001.wav"]
    rec.finish(Outcome(1000))
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["write_failed"] is True and meta["status"] == "recording"  # recover() finishes it later
    assert recover(store, time.time() + 3600) == ["full"]
    assert json.loads((directory / "meta.json").read_text())["files"]["user_audio"] == 1


@pytest.mark.parametrize(
    "session_id",
    [
        "a" * 119 + ".b",  # cut to 120 characters, the name would end in a dot: "..2"
        "a" * 128,
        "a" * 118 + ":.b",
    ],
)
def test_a_long_reused_session_id_still_gets_a_recording_of_its_own(store, session_id):
    failures = []
    for _ in range(3):
        rec = duplex(store, session_id, on_failure=lambda rid, why: failures.append(why))
        send(rec, 1.0, True, chunk())
        rec.finish(Outcome(1000))
    assert failures == []
    names = sorted(p.name for p in store.root.iterdir())
    assert len(names) == 3 and session_id in names
    assert all(len(n) <= 128 and ".." not in n for n in names)
