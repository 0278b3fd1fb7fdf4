"""What a worker's protocol handler is: one session of one wire protocol on the worker's engine.

The hosting code (``worker.hosting``) accepts the connection, takes the engine host, and runs the
handler on the session runtime: ``on_frame`` for every client frame (an ``OmnivoxError`` it raises is
reported in the protocol's words), ``main`` for the session's own loop if it has one, ``close`` when
the session is over, before the engine is reset for the next one.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from omnivox.connection.runtime import Connection
from omnivox.core.config import Settings
from omnivox.protocol.control.internal import Metrics, PauseReport, TurnEndReport
from omnivox.worker.host import EngineHost


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    query: dict[str, str] = field(default_factory=dict)
    behind_gateway: bool = False  # the gateway connected: internal frames go to it
    worker_id: str | None = None  # this worker's id in the gateway's pool (when it said)


class SessionHandler:
    def __init__(self, conn: Connection, host: EngineHost, settings: Settings, info: SessionInfo) -> None:
        self.conn = conn
        self.host = host
        self.settings = settings
        self.info = info

    async def on_frame(self, raw: str | bytes) -> None:
        raise NotImplementedError

    def main(self) -> Coroutine[Any, Any, None] | None:
        """The session's own loop (None: it only answers frames)."""
        return None

    async def close(self) -> None:
        """The session is over (however it ended); runs before the engine is reset."""

    def internal(self, frame: Metrics | TurnEndReport | PauseReport) -> None:
        """Tell the gateway (only a gateway: direct clients never see internal frames)."""
        if self.info.behind_gateway:
            self.conn.send(frame.model_dump_json())
