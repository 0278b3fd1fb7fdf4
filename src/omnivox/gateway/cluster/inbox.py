"""A gateway's inbox: the stream a script writes this gateway's events to, whoever's operation made
them (``assigned``: a worker for one of its tickets; ``cancelled``: one of its tickets, cancelled on
another gateway). One task reads it (``XREAD BLOCK``) from the last id it read, and trims what it
read; an event read twice is harmless (the ticket id makes it idempotent)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster import codec
from omnivox.gateway.cluster.connection import reaching
from omnivox.gateway.scheduling.store import Assignment

BLOCK_MS = 1000


class Inbox:
    def __init__(
        self,
        client: Any,
        key: str,
        assigned: Callable[[Assignment, int], None],
        cancelled: Callable[[str], None],
    ) -> None:
        self.client = client
        self.key = key
        self._assigned = assigned
        self._cancelled = cancelled
        self.last = "0-0"

    async def poll(self, block_ms: int | None = None) -> int:
        """Read once (waiting up to ``block_ms``; None: not at all), act, trim; events read."""
        async with reaching("inbox"):
            reply = await self.client.xread({self.key: self.last}, count=1000, block=block_ms)
        read = 0
        for _stream, events in reply or []:
            for event_id, fields in events:
                self.last = event_id
                read += 1
                if fields.get("k") == "assigned":
                    self._assigned(*codec.event_assignment(fields))
                elif fields.get("k") == "cancelled":
                    self._cancelled(fields["t"])
        if read:
            ms, _, seq = self.last.partition("-")
            async with reaching("inbox"):
                await self.client.xtrim(self.key, minid=f"{ms}-{int(seq) + 1}", approximate=False)
        return read

    async def run(self) -> None:
        while True:
            try:
                await self.poll(BLOCK_MS)
            except StoreUnavailable:
                await asyncio.sleep(0.2)

    def restart(self) -> None:
        """The store lost its state: a new stream, read from its start."""
        self.last = "0-0"
