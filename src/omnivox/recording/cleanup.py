"""Removing old recordings (the MiniCPM-o demo's "Session Cleanup"): by age, then by size.

- By age: a recording that ended more than ``retention_days`` ago is removed (0: every finished one).
- By size: while all recordings together take more than ``max_storage_gb``, the least recently used
  finished one is removed (used: made, or read through the API).

A recording being made is never removed: its process holds its lock (checked across processes, so
the command line and a running gateway can clean the same folder), and an unfinished one nobody
holds is left alone until it has been quiet for a while (its process may have died mid-session; the
gateway finishes such recordings at startup). The gateway runs this every ``cleanup_interval_s``;
``omnivox recordings cleanup`` runs it once.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from omnivox.core.errors import NotFound, RecordingBusy
from omnivox.recording.finalize import RECOVER_AFTER_S
from omnivox.recording.store import META, Entry, RecordingStore, dir_bytes, remove_tree

GB = 1024**3


@dataclass(frozen=True)
class Removal:
    recording_id: str
    reason: str  # "age" | "size"
    bytes: int
    started_at: float
    last_used: float

    def line(self, dry_run: bool) -> str:
        when = datetime.fromtimestamp(self.started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        verb = "would remove" if dry_run else "removed"
        return f"{verb} {self.recording_id} ({self.reason}; {self.bytes / 2**20:.1f} MiB; started {when})"


@dataclass
class CleanupReport:
    removed: list[Removal] = field(default_factory=list)
    kept: int = 0
    live: list[str] = field(default_factory=list)  # being recorded: never touched
    bytes_before: int = 0
    bytes_after: int = 0
    dry_run: bool = False

    def lines(self) -> list[str]:
        out = [r.line(self.dry_run) for r in self.removed]
        verb = "would remove" if self.dry_run else "removed"
        out.append(
            f"{verb} {len(self.removed)} recording(s), {sum(r.bytes for r in self.removed) / 2**20:.1f} MiB; "
            f"{self.kept} kept ({self.bytes_after / 2**20:.1f} MiB), {len(self.live)} being recorded"
        )
        return out


def _size(entry: Entry) -> int:
    value = entry.meta.get("bytes")
    if entry.meta.get("status") == "complete" and isinstance(value, int):
        return value
    return dir_bytes(entry.path)


def cleanup(
    store: RecordingStore,
    *,
    retention_days: float | None,
    max_storage_gb: float | None,
    dry_run: bool = False,
    now: float | None = None,
    live: set[str] | frozenset[str] = frozenset(),
) -> CleanupReport:
    """Remove (or, with ``dry_run``, list) what the retention rules say must go. Blocking."""
    now = time.time() if now is None else now
    report = CleanupReport(dry_run=dry_run)
    entries = store.entries()
    sizes = {e.recording_id: _size(e) for e in entries}
    report.bytes_before = sum(sizes.values())
    removable: list[Entry] = []
    for entry in entries:
        unfinished = entry.meta.get("status") != "complete"
        if (
            entry.recording_id in live
            or store.is_live(entry.path)
            or (unfinished and now - entry.last_activity() < RECOVER_AFTER_S)
        ):
            report.live.append(entry.recording_id)
        else:
            removable.append(entry)
    doomed: dict[str, Removal] = {}
    if retention_days is not None:
        cutoff = now - retention_days * 86400
        for entry in removable:
            ended = entry.ended_at or entry.last_activity()
            if ended <= cutoff:
                doomed[entry.recording_id] = _removal(entry, "age", sizes)
    if max_storage_gb is not None:
        total = report.bytes_before - sum(r.bytes for r in doomed.values())
        for entry in sorted(removable, key=lambda e: e.last_used()):
            if total <= max_storage_gb * GB:
                break
            if entry.recording_id not in doomed:
                doomed[entry.recording_id] = _removal(entry, "size", sizes)
                total -= sizes[entry.recording_id]
    for removal in doomed.values():
        if not dry_run:
            try:
                store.delete(removal.recording_id)  # checks the lock once more, under it
            except RecordingBusy:
                report.live.append(removal.recording_id)
                continue
            except NotFound:
                continue  # removed meanwhile (a DELETE, another cleanup)
        report.removed.append(removal)
    if not dry_run:
        _sweep(store, now)
    report.kept = len(entries) - len(report.removed)
    report.bytes_after = report.bytes_before - sum(r.bytes for r in report.removed)
    return report


def _removal(entry: Entry, reason: str, sizes: dict[str, int]) -> Removal:
    return Removal(entry.recording_id, reason, sizes[entry.recording_id], entry.started_at, entry.last_used())


def _sweep(store: RecordingStore, now: float) -> None:
    """Leftovers: removals that were interrupted (renamed out of the listing, not yet gone), and
    recordings that never got a meta.json (their disk filled up at once), once nobody holds them."""
    root = store.root
    if not root.is_dir():
        return
    for item in root.glob(".deleting-*"):
        shutil.rmtree(item, ignore_errors=True)
    for item in root.iterdir():
        if item.name.startswith(".") or item.is_symlink() or not item.is_dir() or (item / META).exists():
            continue
        try:
            quiet = now - item.stat().st_mtime >= RECOVER_AFTER_S
        except OSError:
            continue
        if quiet and not store.is_live(item):
            remove_tree(item)
