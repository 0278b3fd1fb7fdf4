"""Where recordings live and how they are found, read and removed, with every path checked.

Layout under ``data_dir/sessions`` (the MiniCPM-o demo's)::

    {recording_id}/meta.json           kind, times, workers, config, outcome, figures of the whole
    {recording_id}/recording.json      the timeline (written when the session ends)
    {recording_id}/timeline.jsonl      the timeline while the session runs (one event a line)
    {recording_id}/user_audio/NNNNNN.wav, ai_audio/NNNNNN.wav    audio chunks as they came
    {recording_id}/user_frames/NNNNNN.jpg|png, user_images/NNNNNN.png|jpg
    {recording_id}/merged_replay.wav   stereo: user left, assistant right, on the session's clock
    {recording_id}/merged_replay.mp4   omni duplex: the camera frames with that audio
    {recording_id}/.lock               held (flock) by the process recording it, while it records

A recording id is the session id, or the session id with ``.2``, ``.3``... when a directory of that
name exists already (clients choose session ids and may reuse them). Ids and file paths are checked
against the exact shapes this module makes before any path is built: nothing a request names can
reach outside the recording's directory.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnivox.core.errors import InvalidCursor, NotFound, RecordingBusy

SESSIONS_DIR = "sessions"
META = "meta.json"
TIMELINE = "recording.json"
JOURNAL = "timeline.jsonl"
LOCK = ".lock"
USED = ".used"  # its mtime: when the recording was last read (cleanup by size goes least recent first)
REPLAY_WAV = "merged_replay.wav"
REPLAY_MP4 = "merged_replay.mp4"
FOLDERS = ("user_audio", "ai_audio", "user_frames", "user_images")

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_FILE = re.compile(
    r"(?:(?:user_audio|ai_audio|user_frames|user_images)/)?[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.[a-z0-9]{1,5}"
)


def check_recording_id(recording_id: str) -> str:
    """``recording_id`` if it has the shape of one (else ``NotFound``: it names nothing here)."""
    if not _ID.fullmatch(recording_id) or ".." in recording_id:
        raise NotFound(f"no recording {recording_id!r}")
    return recording_id


def check_file(path: str) -> str:
    """A file path inside a recording: a known folder (or none) and a plain file name."""
    if not _FILE.fullmatch(path) or path.startswith((LOCK, USED)):
        raise NotFound(f"no file {path!r}")
    return path


@contextlib.contextmanager
def _lock_probe(directory: Path) -> Iterator[bool]:
    """Take the recording's lock for the block if nobody holds it; yields whether it was free."""
    try:
        fd = os.open(directory / LOCK, os.O_RDWR)
    except FileNotFoundError:
        yield True  # never locked (or being created this instant: callers also check its age)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                yield False
                return
            raise
        yield True
    finally:
        os.close(fd)


def hold_lock(directory: Path) -> int:
    """Lock a recording as being made by this process; the lock goes with the returned fd (or the
    process)."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` whole (a reader sees the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    except OSError:  # a full disk: the old file stays whole, and no half of the new one is left
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


def dir_bytes(directory: Path) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


@dataclass(frozen=True)
class Entry:
    """One recording as cleanup and listings see it."""

    recording_id: str
    path: Path
    meta: dict[str, Any]

    @property
    def started_at(self) -> float:
        value = self.meta.get("started_at")
        return float(value) if isinstance(value, int | float) else 0.0

    @property
    def ended_at(self) -> float | None:
        value = self.meta.get("ended_at")
        return float(value) if isinstance(value, int | float) else None

    def last_activity(self) -> float:
        """When anything was last written (the journal grows while a session records)."""
        latest = self.ended_at or self.started_at
        for name in (JOURNAL, META):
            with contextlib.suppress(OSError):
                latest = max(latest, (self.path / name).stat().st_mtime)
        return latest

    def last_used(self) -> float:
        """When it was last made or read."""
        used = self.ended_at or self.last_activity()
        with contextlib.suppress(OSError):
            used = max(used, (self.path / USED).stat().st_mtime)
        return used


class RecordingStore:
    """The recordings in one folder. Blocking file work: call it from a thread."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def under(cls, data_dir: str | os.PathLike[str]) -> RecordingStore:
        return cls(Path(data_dir) / SESSIONS_DIR)

    # ---- paths

    def dir_of(self, recording_id: str) -> Path:
        return self.root / check_recording_id(recording_id)

    def existing(self, recording_id: str) -> Path:
        directory = self.dir_of(recording_id)
        if directory.is_symlink() or not directory.is_dir():
            raise NotFound(f"no recording {recording_id!r}")
        return directory

    def file_of(self, recording_id: str, path: str) -> Path:
        """An existing regular file of a recording (symlinks refused: nothing written here makes one)."""
        target = self.existing(recording_id) / check_file(path)
        if target.is_symlink() or not target.is_file():
            raise NotFound(f"no file {path!r} in recording {recording_id!r}")
        return target

    # ---- reading

    def entries(self) -> list[Entry]:
        """Every recording with a readable meta.json (in no particular order)."""
        if not self.root.is_dir():
            return []
        found = []
        for item in os.scandir(self.root):
            if not _ID.fullmatch(item.name) or not item.is_dir(follow_symlinks=False):
                continue
            meta = read_json(Path(item.path) / META)
            if meta is not None:
                found.append(Entry(item.name, Path(item.path), meta))
        return found

    def meta(self, recording_id: str) -> dict[str, Any]:
        meta = read_json(self.existing(recording_id) / META)
        if meta is None:
            raise NotFound(f"no recording {recording_id!r}")
        return meta

    def timeline(self, recording_id: str) -> dict[str, Any] | None:
        """The finished timeline, or None while the session is still recording."""
        return read_json(self.existing(recording_id) / TIMELINE)

    def journal(self, recording_id: str) -> list[dict[str, Any]]:
        """The events written so far of a recording still being made."""
        events = []
        with contextlib.suppress(FileNotFoundError):
            with open(self.existing(recording_id) / JOURNAL, encoding="utf-8") as f:
                for line in f:
                    with contextlib.suppress(ValueError):
                        events.append(json.loads(line))
        return events

    def is_live(self, directory: Path) -> bool:
        """Whether a process (this one or another) is recording into ``directory`` now."""
        with _lock_probe(directory) as free:
            return not free

    def touch_used(self, recording_id: str) -> None:
        with contextlib.suppress(OSError):
            (self.existing(recording_id) / USED).touch()

    # ---- removing

    def delete(self, recording_id: str) -> None:
        """Remove a finished recording (``RecordingBusy`` while its session records)."""
        directory = self.existing(recording_id)
        with _lock_probe(directory) as free:
            if not free:
                raise RecordingBusy(f"recording {recording_id!r} is being made; end its session first")
            remove_tree(directory)


def remove_tree(directory: Path) -> None:
    """Remove a recording: renamed out of the listing first, so no reader sees half of one."""
    doomed = directory.with_name(f".deleting-{directory.name}-{time.monotonic_ns()}")
    try:
        directory.rename(doomed)
    except FileNotFoundError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def encode_cursor(started_at: float, recording_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([started_at, recording_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        started, rid = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return float(started), str(rid)
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
        raise InvalidCursor("the cursor is not one this server gave") from exc
