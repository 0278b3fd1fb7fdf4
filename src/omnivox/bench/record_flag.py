"""Recording on or off for the load benchmarks (``--record off on``), and what it wrote.

Not a benchmark itself: ``bench realtime`` and ``bench duplex`` run their load once per setting on a
gateway whose data directory is a fresh temporary folder, then read what the recorder left there
after the gateway has finished every recording (it does before it exits).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from omnivox.recording.store import RecordingStore

MB = 1_000_000


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="session recording on the gateway, each setting a run of its own (off on: compare)",
    )


def record_env(record: str, data_dir: Path) -> dict[str, str]:
    return {
        "OMNIVOX_RECORD_SESSIONS": "true" if record == "on" else "false",
        "OMNIVOX_DATA_DIR": str(data_dir),
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
    }


def recorded(data_dir: Path) -> dict[str, Any]:
    """Sessions recorded, their minutes, bytes, bytes per session-minute, frames dropped."""
    entries = RecordingStore.under(data_dir).entries()
    minutes = sum(float(e.meta.get("duration_s") or 0) for e in entries) / 60
    total = sum(int(e.meta.get("bytes") or 0) for e in entries)
    return {
        "sessions": len(entries),
        "complete": sum(1 for e in entries if e.meta.get("status") == "complete"),
        "minutes": round(minutes, 3),
        "bytes": total,
        "mb_per_min": round(total / MB / minutes, 3) if minutes else float("nan"),
        "dropped_frames": sum(int(e.meta.get("dropped_frames") or 0) for e in entries),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_finished(data_dir: Path, timeout_s: float = 60.0) -> None:
    """Until every recording under ``data_dir`` is finished (replays built), or the time is up."""
    deadline = time.monotonic() + timeout_s
    store = RecordingStore.under(data_dir)
    while time.monotonic() < deadline:
        if all(e.meta.get("status") == "complete" for e in store.entries()):
            return
        time.sleep(0.2)
