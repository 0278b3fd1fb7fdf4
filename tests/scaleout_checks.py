"""What the scale-out process tests share: the settings of their gateways and workers, and the
checks over a worker's log (its sessions' start and end with their fencing epoch, its refusals)."""

from __future__ import annotations

import itertools
import re
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


def worker_sessions(log: Path) -> tuple[list[tuple[float, float, str]], list[tuple[str, str]]]:
    """From a worker's log: its sessions (start, end, epoch), and its refusals (code, epoch)."""
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
    return sorted(sessions), refusals


def assert_no_overlap(sessions: list[tuple[float, float, str]]) -> None:
    for (_, end, e1), (start, _, e2) in itertools.pairwise(sessions):
        assert end <= start, f"sessions {e1} and {e2} overlap on the worker"
    epochs = [int(e) for _, _, e in sessions]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs
