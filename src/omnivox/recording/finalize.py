"""Finishing a recording: the journal becomes ``recording.json``, the chunks become the merged replays,
and ``meta.json`` gets the outcome and the figures of the whole session.

It works from what is on disk only, so a recording whose process died mid-session (no one holds its
lock any more) is finished the same way later (``recover``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from omnivox.recording.replay import build_mp4, build_wav
from omnivox.recording.store import (
    FOLDERS,
    JOURNAL,
    LOCK,
    META,
    REPLAY_MP4,
    REPLAY_WAV,
    TIMELINE,
    RecordingStore,
    dir_bytes,
    hold_lock,
    read_json,
    write_json,
)
from omnivox.recording.turns import build_turns, heard_ends

log = logging.getLogger(__name__)

_SEARCH_CHARS = 20_000  # transcript text kept in meta.json for searches
RECOVER_AFTER_S = 600.0  # a recording nobody holds and nobody wrote to for this long was orphaned


def read_journal(directory: Path) -> list[dict[str, Any]]:
    events = []
    with contextlib.suppress(FileNotFoundError):
        with open(directory / JOURNAL, encoding="utf-8") as f:
            for line in f:
                with contextlib.suppress(ValueError):  # a line cut short by a crash
                    entry = json.loads(line)
                    if isinstance(entry, dict) and isinstance(entry.get("type"), str):
                        events.append(entry)
    return events


def finalize(directory: Path, ending: dict[str, Any]) -> dict[str, Any]:
    """Write ``recording.json``, the replays and the final ``meta.json``; returns the meta."""
    meta = read_json(directory / META) or {}
    events = read_journal(directory)
    heard_ends(events)
    turns = build_turns(events)
    audio = [e for e in events if e["type"] == "audio"]
    frames = [e for e in events if e["type"] == "frame"]
    duration = max([e.get("end", e.get("t", 0.0)) for e in events] + [t["end"] for t in turns] + [0.0])
    replay = {"wav": False, "mp4": False}
    if audio:
        duration = max(duration, build_wav(directory, audio, directory / REPLAY_WAV))
        replay["wav"] = True
        if frames:
            try:
                replay["mp4"] = build_mp4(
                    directory, frames, directory / REPLAY_WAV, directory / REPLAY_MP4, duration
                )
            except Exception:
                log.exception("the video replay of %s could not be built", directory.name)
    timeline = {
        "version": 1,
        "recording_id": directory.name,
        "session_id": meta.get("session_id", directory.name),
        "kind": meta.get("kind"),
        "duration_s": round(duration, 3),
        "turns": turns,
        "events": events,
    }
    write_json(directory / TIMELINE, timeline)
    counts = {
        folder: sum(1 for e in events if e.get("file", "").startswith(folder + "/")) for folder in FOLDERS
    }
    meta.update(ending)
    meta.update(
        status="complete",
        duration_s=round(duration, 3),
        turns=sum(1 for t in turns if t["role"] == "assistant"),
        user_turns=sum(1 for t in turns if t["role"] == "user"),
        barge_ins=sum(1 for e in events if e["type"] == "barge_in"),
        files=counts,
        replay=replay,
        search_text=_search_text(turns),
    )
    write_json(directory / META, meta)
    # only now: a finish the disk interrupts before meta.json says complete is done again from the
    # journal (by ``recover``), which must still be there, or the timeline is rewritten empty
    (directory / JOURNAL).unlink(missing_ok=True)
    meta["bytes"] = dir_bytes(directory)
    write_json(directory / META, meta)
    return meta


def _search_text(turns: list[dict[str, Any]]) -> str:
    return " \n".join(t["text"] for t in turns if t["text"])[:_SEARCH_CHARS]


def recover(store: RecordingStore, now: float, grace_s: float = RECOVER_AFTER_S) -> list[str]:
    """Finish the recordings whose process died mid-session (unlocked, unfinished, quiet for
    ``grace_s``); returns their ids."""
    done = []
    for entry in store.entries():
        if entry.meta.get("status") == "complete" or store.is_live(entry.path):
            continue
        last = entry.last_activity()
        if now - last < grace_s:
            continue
        try:
            fd = hold_lock(entry.path)  # another process may be recovering it this moment
        except OSError:
            continue
        try:
            finalize(entry.path, {"ended_at": round(last, 3), "outcome": {"reason": "recorder_stopped"}})
            done.append(entry.recording_id)
        except Exception:
            log.exception("recording %s could not be recovered", entry.recording_id)
        finally:
            with contextlib.suppress(OSError):
                (entry.path / LOCK).unlink()
            os.close(fd)
    return done
