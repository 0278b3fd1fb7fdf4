"""One session's recording, made from its frames in order on the recorder's threads.

The recording starts lazily: nothing touches the disk until the session has something to keep (its
first audio, text, image or turn), so a session that opts out in its first message (``prepare``,
``prefill``, ``session.update``) leaves nothing behind, and one that opts out later has everything
removed at once. Whether a session is recorded: the server's ``record_sessions``, changed by the
client's ``record`` only where the server allows it (``record_allow_opt_out`` / ``_opt_in``).

Every file write happens here, one session's at a time (its frames are handled strictly in order,
never on two threads at once), so an opt-out or the end of the session never races a write. A write
that fails (disk full, folder unwritable) stops this session's recording: it is reported once, and
the session itself never notices.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from omnivox.audio.wav import write_wav
from omnivox.core.errors import NotFound
from omnivox.protocol.timelines.reader import (
    AssistantCutOff,
    Audio,
    Config,
    ErrorEvent,
    Event,
    Image,
    RecordChoice,
    Text,
    TimelineReader,
    TurnEnd,
    TurnStart,
)
from omnivox.recording.finalize import finalize
from omnivox.recording.journal import describe, iso
from omnivox.recording.store import (
    JOURNAL,
    LOCK,
    META,
    RecordingStore,
    check_recording_id,
    hold_lock,
    remove_tree,
    write_json,
)
from omnivox.recording.tracks import Track, TrackChunk, voiced_spans

log = logging.getLogger(__name__)

_PENDING_LIMIT = 256  # events held before the first thing worth a recording (config, markers)
_FOLDERS = {"user": "user_audio", "assistant": "ai_audio", "frame": "user_frames", "image": "user_images"}
_FREE_CHECK_EVERY = 200  # writes between free-space checks


@dataclass(frozen=True)
class Policy:
    """What the server says about recording, and what it lets a session change."""

    default: bool
    allow_opt_out: bool = True
    allow_opt_in: bool = False
    min_free_bytes: int = 0


@dataclass(frozen=True)
class RecordedSession:
    session_id: str  # the client's (checked again before it names a directory)
    kind: str  # the protocol's name
    task_type: str
    started_at: float  # wall clock
    t0: float  # monotonic time of the session's start: every offset is from here
    client_address: str | None = None


@dataclass
class Outcome:
    """How the session ended, as the gateway saw it."""

    close_code: int | None = None
    client_left: bool = False
    dropped_frames: int = 0  # frames the recorder could not keep up with (never recorded)


@dataclass
class SessionRecording:
    store: RecordingStore
    info: RecordedSession
    reader: TimelineReader
    policy: Policy
    on_failure: Callable[[str, BaseException | str], None] = lambda rid, why: None
    wanted: bool = field(init=False)
    opted_out: bool = False
    failed: bool = False
    finished: bool = False
    refused: list[str] = field(default_factory=list)  # choices the server did not allow
    recording_id: str | None = None
    directory: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    workers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _pending: list[tuple[float, Event]] = field(default_factory=list)
    _journal: TextIO | None = None
    _lock_fd: int | None = None
    _counts: dict[str, int] = field(default_factory=dict)
    _writes: int = 0
    _last_assistant_seq: int = 0

    def __post_init__(self) -> None:
        self.wanted = self.policy.default
        self.tracks = {"user": Track("user"), "assistant": Track("assistant")}

    # ---- what the service hands over, in order

    def frame(self, at: float, from_client: bool, data: str | bytes) -> None:
        if self.finished or self.opted_out or self.failed:
            return
        t = max(0.0, at - self.info.t0)
        for event in self.reader.read(from_client, data):
            self.event(t, event)

    def assigned(self, at: float, worker_id: str, engine: str) -> None:
        entry = {"t": round(max(0.0, at - self.info.t0), 3), "worker_id": worker_id, "engine": engine}
        self.workers.append(entry)
        if self.directory is not None and not self.failed:
            try:
                self._journal_line({"type": "worker", **entry})
                self._write_meta()
            except OSError as exc:
                self._fail(exc)

    def gateway_error(self, at: float, code: str) -> None:
        """An error the gateway itself reported to the client (the worker was lost, ...)."""
        self.event(max(0.0, at - self.info.t0), ErrorEvent(code, "reported by the gateway"))

    def event(self, t: float, event: Event) -> None:
        if isinstance(event, RecordChoice):
            self._choose(t, event.record)
            return
        if isinstance(event, Config):
            self.config.update(event.values)
            return
        if isinstance(event, ErrorEvent):
            self.errors.append(event.code)
        if self.finished or self.opted_out or self.failed or not self.wanted:
            return
        if self.directory is None:
            if not isinstance(event, Audio | Image | Text | TurnStart):
                if len(self._pending) < _PENDING_LIMIT:
                    self._pending.append((t, event))
                return
            if not self._start():
                return
            pending, self._pending = self._pending, []
            try:
                for pt, pe in pending:
                    self._write(pt, pe)
            except OSError as exc:
                self._fail(exc)
                return
        try:
            self._write(t, event)
        except OSError as exc:  # the disk filled up mid-session: the recording stops here, once
            self._fail(exc)

    def flush(self) -> None:
        """After a batch of frames: what was journaled reaches the file (a crash loses little)."""
        if self._journal is not None:
            try:
                self._journal.flush()
            except OSError as exc:
                self._fail(exc)

    def finish(self, outcome: Outcome) -> None:
        """The session is over: write what is buffered and finalize (recording.json, replays, meta)."""
        if self.finished:
            return
        self.finished = True
        if self.directory is None:
            return
        try:
            if not self.failed:
                for track in self.tracks.values():
                    for chunk in track.flush():
                        self._write_chunk(chunk)
            self._close_journal()
            if not self.failed:
                finalize(self.directory, self._ending(outcome))
        except Exception as exc:
            self._fail(exc)
        finally:
            if self.directory is not None:  # still held: nobody can take it in between
                with contextlib.suppress(OSError):
                    (self.directory / LOCK).unlink()
            self._release()

    # ---- choices

    def _choose(self, t: float, record: bool) -> None:
        if not record:
            if not self.policy.allow_opt_out:
                self._refused(t, "opt_out")
                return
            self.opted_out, self.wanted = True, False
            self._pending.clear()
            self._discard()
        elif not self.wanted and not self.opted_out:
            if self.policy.allow_opt_in:
                self.wanted = True
            else:
                self.refused.append("opt_in")

    def _refused(self, t: float, what: str) -> None:
        self.refused.append(what)
        if self.directory is not None:
            self._journal_line({"t": round(t, 3), "type": "marker", "name": f"record_{what}_refused"})

    def _discard(self) -> None:
        """The session opted out: nothing of it stays."""
        if self.directory is None:
            return
        self._close_journal()
        remove_tree(self.directory)
        self._release()
        self.directory = None

    # ---- writing

    def _start(self) -> bool:
        """Create the recording's directory (the first thing worth keeping has come)."""
        root = self.store.root
        try:
            root.mkdir(parents=True, exist_ok=True)
            if self.policy.min_free_bytes and shutil.disk_usage(root).free < self.policy.min_free_bytes:
                raise OSError(f"less than {self.policy.min_free_bytes // 2**20} MiB free on {root}")
            self.directory = self._claim(check_recording_id(self.info.session_id))
            self._lock_fd = hold_lock(self.directory)
            self._write_meta()
            self._journal = open(self.directory / JOURNAL, "a", encoding="utf-8")
        except (OSError, NotFound) as exc:  # NotFound: an id no recording may have (never a path)
            self._fail(exc)
            return False
        return True

    def _claim(self, base: str) -> Path:
        """The first free name of ``base``, ``base.2``, ``base.3``... (made here, so it is ours)."""
        stem = base[:120].rstrip(".")  # room for ".NNNN", and never ".." where a dot was cut to
        for n in range(1, 10_000):
            name = base if n == 1 else f"{stem}.{n}"
            directory = self.store.dir_of(name)
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            self.recording_id = name
            return directory
        raise OSError(f"no free recording name for {base!r}")

    def _write(self, t: float, event: Event) -> None:
        if isinstance(event, Audio):
            for chunk in self.tracks[event.role].add(t, event):
                self._write_chunk(chunk)
            return
        if isinstance(event, AssistantCutOff):
            for chunk in self.tracks["assistant"].cut(t):
                self._write_chunk(chunk)
            self._journal_line(
                {
                    "t": round(t, 3),
                    "type": "barge_in",
                    "reason": event.reason,
                    "cut_seq": self._last_assistant_seq,
                }
            )
            return
        if isinstance(event, Image):
            ext = (
                "png"
                if event.data[:8] == b"\x89PNG\r\n\x1a\n"
                else "jpg"
                if event.data[:2] == b"\xff\xd8"
                else None
            )
            if ext is not None:
                name = self._file(_FOLDERS[event.kind], ext, event.data)
                self._journal_line({"t": round(t, 3), "type": event.kind, "file": name})
            return
        if isinstance(event, TurnStart | TurnEnd):
            # a turn's audio is journaled inside it: what is buffered goes before the marker
            for chunk in self.tracks[event.role].flush():
                self._write_chunk(chunk)
        self._journal_line({"t": round(t, 3), **describe(event)})

    def _write_chunk(self, chunk: TrackChunk) -> None:
        name = self._file(_FOLDERS[chunk.role], "wav", write_wav(chunk.samples, chunk.sample_rate))
        entry: dict[str, Any] = {
            "t": round(chunk.t, 3),
            "type": "audio",
            "role": chunk.role,
            "file": name,
            "start": round(chunk.start, 4),
            "duration": round(chunk.duration, 4),
            "sample_rate": chunk.sample_rate,
            "seq": self._counts[_FOLDERS[chunk.role]],
        }
        if chunk.role == "assistant":
            self._last_assistant_seq = entry["seq"]
        if chunk.stream_pos is not None:
            entry["stream_pos"] = round(chunk.stream_pos, 4)
        if chunk.role == "user":
            entry["voiced"] = voiced_spans(chunk.samples, chunk.sample_rate)
        self._journal_line(entry)

    def _file(self, folder: str, ext: str, data: bytes) -> str:
        assert self.directory is not None
        n = self._counts.get(folder, 0) + 1
        self._counts[folder] = n
        if n == 1:
            (self.directory / folder).mkdir(exist_ok=True)
        name = f"{folder}/{n:06d}.{ext}"
        try:
            with open(self.directory / name, "wb") as f:
                f.write(data)
        except OSError:  # a full disk: no half of a file stays behind (nothing would read it)
            with contextlib.suppress(OSError):
                (self.directory / name).unlink()
            raise
        self._wrote()
        return name

    def _journal_line(self, entry: dict[str, Any]) -> None:
        if self._journal is None:
            return
        self._journal.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")

    def _wrote(self) -> None:
        self._writes += 1
        if self.policy.min_free_bytes and self._writes % _FREE_CHECK_EVERY == 0:
            assert self.directory is not None
            if shutil.disk_usage(self.directory).free < self.policy.min_free_bytes:
                raise OSError(f"less than {self.policy.min_free_bytes // 2**20} MiB left on the disk")

    def _write_meta(self, **extra: Any) -> None:
        assert self.directory is not None and self.recording_id is not None
        info = self.info
        meta: dict[str, Any] = {
            "recording_id": self.recording_id,
            "session_id": info.session_id,
            "kind": info.kind,
            "task_type": info.task_type,
            "status": "recording",
            "started_at": round(info.started_at, 3),
            "created_at": iso(info.started_at),
            "workers": self.workers,
            "engine": self.workers[-1]["engine"] if self.workers else None,
            "config": self.config,
        }
        if info.client_address is not None:
            meta["client_address"] = info.client_address
        write_json(self.directory / META, {**meta, **extra})

    def _ending(self, outcome: Outcome) -> dict[str, Any]:
        ended = time.time()
        if "worker_lost" in self.errors:
            reason = "worker_lost"
        elif outcome.client_left:
            reason = "client_left"
        else:
            reason = {None: "closed", 1000: "closed", 1008: "policy", 1011: "server_error"}.get(
                outcome.close_code, "closed"
            )
        self._write_meta()  # the latest config and workers
        return {
            "ended_at": round(ended, 3),
            "ended": iso(ended),
            "outcome": {
                "reason": reason,
                "close_code": outcome.close_code,
                "errors": sorted(set(self.errors)),
            },
            "dropped_frames": outcome.dropped_frames,
            "incomplete": outcome.dropped_frames > 0,
            "record_refused": sorted(set(self.refused)),
        }

    # ---- failures and the end

    def _fail(self, why: BaseException | str) -> None:
        if self.failed:
            return
        self.failed = True
        self._close_journal()
        if self.directory is not None:
            with contextlib.suppress(Exception):
                self._write_meta(write_failed=True)
        self.on_failure(self.recording_id or self.info.session_id, why)

    def _close_journal(self) -> None:
        if self._journal is not None:
            with contextlib.suppress(OSError):
                self._journal.close()
            self._journal = None

    def _release(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None
