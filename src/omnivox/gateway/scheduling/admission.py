"""Admission: a session gets a worker through the pool, and hears where it stands while it waits.

One notifier task per gateway tells every waiting client its position and ETA: after a change of the
queue (a burst of changes is coalesced into one round), and at least every ``interval_s``. A round
costs one pass over the queue, however many clients wait and however many changes caused it; a
waiter per client woken by every change would cost O(clients) per change, O(n^2) when a long
queue drains or its clients leave together.

Sessions differ only in how they word the notices (the streaming protocol's ``queued`` /
``queue_update`` / ``queue_done``, the realtime extension event ``omnivox.queue``), so they pass a
``notify`` callback that takes a protocol-neutral ``QueueNotice``.

A waiter cancelled in the very step its ticket was assigned gives the worker back: a worker is never
left busy for a session that is no longer there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from omnivox.core.errors import SessionLimitReached
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.pool import Ticket, WorkerPool, WorkerRecord
from omnivox.protocol.control.queue import NoticeKind, QueueNotice

Notify = Callable[[QueueNotice], None]


class Tracked(Protocol):
    """A session's entry in the session registry, which admission keeps current."""

    def queued(self, ticket_id: str | None) -> None: ...

    def active(self, worker_id: str, ticket_id: str | None = None) -> None: ...

    def idle(self) -> None: ...


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
        record: Tracked | None = None,
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
            was_queued = not ticket.future.done()
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
            QueueNotice(
                "queue_done",
                ticket.ticket_id,
                worker_id=worker.worker_id,
                waited_s=round(waited, 3),
                was_queued=was_queued,
            )
        )
        return worker, ticket

    async def _wait(
        self, ticket: Ticket, gone: asyncio.Event, notify: Notify, max_wait_s: float | None
    ) -> WorkerRecord:
        if ticket.future.done():
            return ticket.future.result()
        position, wait = self.pool.position(ticket.ticket_id) or (0, 0.0)
        notify(self._notice("queued", ticket.ticket_id, position, wait))
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
        except asyncio.CancelledError:
            # the waiter is going (its connection ended, or shutdown): give back what it holds
            if not ticket.future.done():
                self.pool.cancel(ticket.ticket_id)
            elif not ticket.future.cancelled() and ticket.future.exception() is None:
                self.pool.release(ticket.future.result(), ticket_id=ticket.ticket_id)
            raise
        finally:
            del self._watching[ticket.ticket_id]
            leaving.cancel()

    def _notice(self, kind: NoticeKind, ticket_id: str, position: int, wait: float) -> QueueNotice:
        return QueueNotice(kind, ticket_id, position, self.pool.queue_length, wait)

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
                watch.notify(self._notice("queue_update", ticket_id, position, wait))
                watch.position, watch.sent_at = position, now
