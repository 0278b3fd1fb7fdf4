"""What the scale-out process tests share: the settings of their gateways and workers, and the
checks over a worker's log (its sessions' start and end with their fencing epoch, its refusals)."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

USER = [{"role": "user", "content": "hello"}]
LEASE_S = 1.5
ENV = {
    "OMNIVOX_GATEWAY_LEASE_S": str(LEASE_S),
    "OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0",  # every client comes from this one address
    "OMNIVOX_CLIENT_CONNECT_RATE": "0",
    "OMNIVOX_RESUME_GRACE_S": "4",  # a dead gateway's waiters keep their places this long
}
WORKER_LOG = {"OMNIVOX_LOG_LEVEL": "INFO"}
_LINE = re.compile(r"session (start|end|refused \((\w+)\)): epoch=(\S+) ticket=(\S+)(?: t=([\d.]+))?")


def worker_sessions(
    log: Path, settle_s: float = 10.0
) -> tuple[list[tuple[float, float, str]], list[tuple[str, str]]]:
    """From a worker's log: its sessions (start, end, epoch), and its refusals (code, epoch).

    A session's end line is written when the client's close reaches the worker through the
    gateway, a moment after the client saw its last word: so a log with a session started and not
    ended is read again for up to ``settle_s`` (0: read once), then taken as it is."""
    deadline = time.monotonic() + settle_s
    while True:
        sessions, refusals, still_open = _read_sessions(log)
        if not still_open or time.monotonic() >= deadline:
            return sessions, refusals
        time.sleep(0.1)


def _read_sessions(log: Path) -> tuple[list[tuple[float, float, str]], list[tuple[str, str]], int]:
    """The sessions and refusals in ``log``, and how many sessions it started and has not ended."""
    starts: dict[str, float] = {}
    sessions, refusals = [], []
    for line in log.read_text(errors="replace").splitlines():
        m = _LINE.search(line)
        if m is None:
            continue
        what, code, epoch, _ticket, at = m.groups()
        if what == "start":
            starts[epoch] = float(at)
        elif what == "end":
            sessions.append((starts.pop(epoch), float(at), epoch))
        else:
            refusals.append((code, epoch))
    return sorted(sessions), refusals, len(starts)


def assert_no_overlap(sessions: list[tuple[float, float, str]]) -> None:
    for (_, end, e1), (start, _, e2) in itertools.pairwise(sessions):
        assert end <= start, f"sessions {e1} and {e2} overlap on the worker"
    epochs = [int(e) for _, _, e in sessions]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs
