"""The sessions connected to this gateway, for ``GET /api/sessions`` and the admin page.

A session is one client connection (a streaming chat, a realtime call). Its record says where it
stands: waiting in the queue, holding a worker, or between turns (a streaming session holds a worker
only from ``prefill`` to ``done``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from omnivox.core import clock as clocks
from omnivox.core.ids import new_id


class SessionState(StrEnum):
    IDLE = "idle"  # connected, holding no worker (between streaming turns)
    QUEUED = "queued"  # waiting for a worker
    ACTIVE = "active"  # a worker is serving it


@dataclass(eq=False)
class SessionRecord:
    kind: str  # "streaming" | "realtime" | ...
    client_session_id: str  # what the client named it (not unique: clients choose it)
    started_at: float  # wall clock
    session_key: str = field(default_factory=lambda: new_id("s"))  # unique on this gateway
    state: SessionState = SessionState.IDLE
    worker_id: str | None = None
    ticket_id: str | None = None
    turns: int = 0  # streaming turns or realtime responses completed
    paused: bool = False  # a duplex session its client paused

    def queued(self, ticket_id: str | None) -> None:
        self.state, self.ticket_id, self.worker_id = SessionState.QUEUED, ticket_id, None

    def active(self, worker_id: str, ticket_id: str | None = None) -> None:
        self.state, self.worker_id, self.ticket_id = SessionState.ACTIVE, worker_id, ticket_id

    def idle(self) -> None:
        self.state, self.worker_id, self.ticket_id = SessionState.IDLE, None, None
        self.paused = False

    def view(self, now: float) -> dict[str, Any]:
        return {
            "session_key": self.session_key,
            "session_id": self.client_session_id,
            "kind": self.kind,
            "state": self.state.value,
            "worker_id": self.worker_id,
            "ticket_id": self.ticket_id,
            "turns": self.turns,
            "paused": self.paused,
            "started_at": self.started_at,
            "duration_s": round(now - self.started_at, 3),
        }


class SessionRegistry:
    """Records of the connected sessions; a record lives exactly as long as its connection."""

    def __init__(self, wall: clocks.Clock = clocks.wall) -> None:
        self.wall = wall
        self._sessions: dict[str, SessionRecord] = {}

    @contextlib.contextmanager
    def track(self, kind: str, client_session_id: str) -> Iterator[SessionRecord]:
        record = SessionRecord(kind=kind, client_session_id=client_session_id, started_at=self.wall())
        self._sessions[record.session_key] = record
        try:
            yield record
        finally:
            del self._sessions[record.session_key]

    def __len__(self) -> int:
        return len(self._sessions)

    def views(self) -> list[dict[str, Any]]:
        now = self.wall()
        return [s.view(now) for s in self._sessions.values()]
