"""Admission: a session gets a worker through the pool, and hears where it stands while it waits.

One notifier task per gateway tells every waiting client its position and ETA: after a change of the
queue (a burst of changes is coalesced into one round), and at least every ``interval_s``. A round
costs one pass over the queue, however many clients wait and however many changes caused it; a
waiter per client woken by every change would cost O(clients) per change, O(n^2) when a long
queue drains or its clients leave together.

Sessions differ only in how they word the notices (the streaming protocol's ``queued`` /
``queue_update`` / ``queue_done``, the realtime extension event ``omnivox.queue``), so they pass a
``notify`` callback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from omnivox.core.errors import SessionLimitReached
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.pool import Ticket, WorkerPool, WorkerRecord
from omnivox.gateway.sessions import SessionRecord

NoticeKind = Literal["queued", "queue_update", "queue_done"]


@dataclass(frozen=True)
class QueueNotice:
    ticket_id: str
    position: int = 0  # 1 = next to be served; 0 once assigned
    queue_length: int = 0
    estimated_wait_s: float = 0.0
    worker_id: str | None = None  # queue_done only
    waited_s: float = 0.0  # queue_done only


Notify = Callable[[NoticeKind, QueueNotice], None]


class ClientGone(Exception):
    """The client disconnected (or closed) while its ticket was queued; the ticket is cancelled."""


@dataclass
class _Watch:
    notify: Notify
    position: int
    sent_at: float


class Admission:
    def __init__(
        self, pool: WorkerPool, metrics: GatewayMetrics, interval_s: float = 3.0, coalesce_s: float = 0.05
    ) -> None:
        self.pool = pool
        self.metrics = metrics
        self.interval_s = interval_s
        self.coalesce_s = coalesce_s
        self._watching: dict[str, _Watch] = {}

    async def acquire(
        self,
        task_type: str,
        gone: asyncio.Event,
        notify: Notify,
        *,
        history_hash: str | None = None,
        record: SessionRecord | None = None,
        max_wait_s: float | None = None,
    ) -> tuple[WorkerRecord, Ticket]:
        """Enqueue and wait for a worker. Raises QueueFull, WorkerUnavailable, TicketCancelled,
        ClientGone (``gone`` was set), or SessionLimitReached (waited ``max_wait_s`` in vain).

        ``record`` (the session's entry in the session registry) follows along: queued while the
        ticket waits, active once a worker is assigned, idle again if admission fails."""
        try:
            ticket = self.pool.enqueue(task_type, history_hash)
            if record is not None:
                record.queued(ticket.ticket_id)
            worker = await self._wait(ticket, gone, notify, max_wait_s)
        except BaseException:
            if record is not None:
                record.idle()
            raise
        if record is not None:
            record.active(worker.worker_id, ticket.ticket_id)
        waited = self.pool.clock() - ticket.enqueued_at
        self.metrics.queue_wait.labels(task_type).observe(waited)
        notify(
            "queue_done", QueueNotice(ticket.ticket_id, worker_id=worker.worker_id, waited_s=round(waited, 3))
        )
        return worker, ticket

    async def _wait(
        self, ticket: Ticket, gone: asyncio.Event, notify: Notify, max_wait_s: float | None
    ) -> WorkerRecord:
        if ticket.future.done():
            return ticket.future.result()
        position, wait = self.pool.position(ticket.ticket_id) or (0, 0.0)
        notify("queued", self._notice(ticket.ticket_id, position, wait))
        loop = asyncio.get_running_loop()
        self._watching[ticket.ticket_id] = _Watch(notify, position, loop.time())
        leaving = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait(
                {ticket.future, leaving}, timeout=max_wait_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not ticket.future.done():
                self.pool.cancel(ticket.ticket_id)
                if leaving.done():
                    raise ClientGone()
                raise SessionLimitReached(
                    f"no worker became free within {max_wait_s:g} s", waited_s=max_wait_s
                )
            return ticket.future.result()  # raises TicketCancelled if it was cancelled
        finally:
            del self._watching[ticket.ticket_id]
            if not ticket.future.done():  # cancelled from outside (shutdown): give the place back
                self.pool.cancel(ticket.ticket_id)
            leaving.cancel()
            with contextlib.suppress(BaseException):
                await leaving

    def _notice(self, ticket_id: str, position: int, wait: float) -> QueueNotice:
        return QueueNotice(ticket_id, position, self.pool.queue_length, wait)

    async def run(self) -> None:
        """The notifier: a round after each (coalesced) change, and a check every half interval."""
        while True:
            await self.pool.wait_changed(self.interval_s / 2)
            await asyncio.sleep(self.coalesce_s)
            self.notify_round()

    def notify_round(self) -> None:
        """Tell each waiting client its place if it moved, or if it last heard ``interval_s`` ago."""
        now = asyncio.get_running_loop().time()
        for ticket_id, watch in list(self._watching.items()):
            entry = self.pool.position(ticket_id)
            if entry is None:
                continue  # assigned or cancelled: its waiter takes over
            position, wait = entry
            if position != watch.position or now - watch.sent_at >= self.interval_s:
                watch.notify("queue_update", self._notice(ticket_id, position, wait))
                watch.position, watch.sent_at = position, now
