"""A gateway's inbox: the stream a script writes this gateway's events to, whoever's operation made
them (``assigned``: a worker for one of its tickets; ``cancelled``: one of its tickets, cancelled on
another gateway). One task reads it (``XREAD BLOCK``) from the last id it read, and trims what it
read; an event read twice is harmless (the ticket id makes it idempotent).

The stream is shared ground (anything that can write to the store can write to it): an event that
does not decode is logged, counted and skipped, and nothing read from the stream ends the loop; one
bad event must never cost a gateway every later assignment."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster import codec
from omnivox.gateway.cluster.connection import reaching
from omnivox.gateway.scheduling.store import Assignment

log = logging.getLogger(__name__)

BLOCK_MS = 1000
FAILED_READ_PAUSE_S = 0.2  # before reading again after a read that failed


def _decoded(fields: Any) -> tuple[str, tuple[Any, ...]] | None:
    """An event's kind and what its handler takes; None for a kind this gateway does not know.
    Raises ``KeyError``/``ValueError``/``TypeError``/``AttributeError`` for a malformed event."""
    kind = fields.get("k")
    if kind == "assigned":
        return kind, codec.event_assignment(fields)
    if kind == "cancelled":
        ticket_id = fields["t"]
        if not isinstance(ticket_id, str) or not ticket_id:
            raise ValueError(f"a cancelled event names no ticket: {ticket_id!r}")
        return kind, (ticket_id,)
    return None


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
        self.malformed = 0  # events skipped because they did not decode

    async def poll(self, block_ms: int | None = None) -> int:
        """Read once (waiting up to ``block_ms``; None: not at all), act, trim; events read."""
        async with reaching("inbox"):
            reply = await self.client.xread({self.key: self.last}, count=1000, block=block_ms)
        read = 0
        for _stream, events in reply or []:
            for event_id, fields in events:
                self.last = event_id  # first: an event that fails below is never read again
                read += 1
                try:
                    event = _decoded(fields)
                except (KeyError, ValueError, TypeError, AttributeError) as exc:
                    self.malformed += 1
                    log.warning(
                        "inbox %s: skipped malformed event %s (%.200r): %r", self.key, event_id, fields, exc
                    )
                    continue
                if event is None:
                    continue
                kind, args = event
                if kind == "assigned":
                    self._assigned(*args)
                else:
                    self._cancelled(*args)
        if read:
            ms, _, seq = self.last.partition("-")
            async with reaching("inbox"):
                await self.client.xtrim(self.key, minid=f"{ms}-{int(seq) + 1}", approximate=False)
        return read

    async def run(self) -> None:
        """Read until cancelled. An unreachable store is waited out; any other failure (a bug, an
        unexpected reply) is logged and the loop goes on past the event that raised it."""
        while True:
            try:
                await self.poll(BLOCK_MS)
            except StoreUnavailable:
                await asyncio.sleep(FAILED_READ_PAUSE_S)
            except Exception:
                log.exception("inbox %s: reading failed after event %s; reading on", self.key, self.last)
                await asyncio.sleep(FAILED_READ_PAUSE_S)

    def restart(self) -> None:
        """The store lost its state: a new stream, read from its start."""
        self.last = "0-0"
