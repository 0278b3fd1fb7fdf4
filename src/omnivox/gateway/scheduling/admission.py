"""Admission: a session gets a worker through the scheduler store, and hears where it stands while
it waits.

One notifier task per gateway tells every waiting client its position and ETA: after a change of the
queue (a burst of changes is coalesced into one round), and at least every ``interval_s``. A round
costs one pass over the queue, however many clients wait and however many changes caused it; a
waiter per client woken by every change would cost O(clients) per change, O(n^2) when a long
queue drains or its clients leave together.

Sessions differ only in how they word the notices (the streaming protocol's ``queued`` /
``queue_update`` / ``queue_done``, the realtime extension event ``omnivox.queue``), so they pass a
``notify`` callback that takes a protocol-neutral ``QueueNotice``.

A waiter cancelled in the very step its ticket was assigned gives the worker back: a worker is never
left busy for a session that is no longer there. A waiter whose client leaves while it waits keeps
its place for ``resume_grace_s`` (``resume``): its first notice carried the token to claim it.

With thousands waiting every dispatch moves everyone, so a round would tell thousands: a waiter near
the head (``HEAD``) hears each move at once, one further back at most every ``interval_s / 3`` (and
every ``interval_s`` anyway). A round sends its notices in slices, yielding between them, and the
notifier rests at least four times as long as its last round took: it never holds the event loop
while a worker freed meanwhile waits to be handed to the head of the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from omnivox.core.errors import OmnivoxError, SessionLimitReached, TicketCancelled
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.resume import ResumeTokens
from omnivox.gateway.scheduling.store import Assignment, SchedulerStore, Ticket
from omnivox.protocol.control.queue import NoticeKind, QueueNotice

log = logging.getLogger(__name__)

Notify = Callable[[QueueNotice], None]
_SLICE = 200  # notices sent in a round before it yields to the event loop
HEAD = 10  # waiters this close to the head hear every move of theirs at once


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
        self,
        store: SchedulerStore,
        metrics: GatewayMetrics,
        interval_s: float = 3.0,
        coalesce_s: float = 0.05,
        resume_grace_s: float = 0.0,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.interval_s = interval_s
        self.coalesce_s = coalesce_s
        self.resume_grace_s = resume_grace_s
        self.tokens = ResumeTokens()
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
        resume: str | None = None,
    ) -> tuple[Assignment, Ticket]:
        """Enqueue and wait for a worker. Raises QueueFull, WorkerUnavailable, TicketCancelled,
        ClientGone (``gone`` was set), SessionLimitReached (waited ``max_wait_s`` in vain),
        InvalidResumeToken or StoreUnavailable.

        ``resume``: the token of a place this client held before its connection dropped; it takes
        that place back if it is still kept (else it queues anew, and the notice says so).

        ``record`` (the session's entry in the session registry) follows along: queued while the
        ticket waits, active once a worker is assigned, idle again if admission fails."""
        if gone.is_set():  # its client left before its turn was read: it never takes a worker
            raise ClientGone()
        try:
            ticket = None
            if resume is not None:
                ticket = await self.store.reattach(self.tokens.ticket_of(resume), task_type)
            resumed = ticket is not None
            if ticket is None:
                ticket = await self.store.enqueue(task_type, history_hash)
        except BaseException:
            if record is not None:
                record.idle()
            raise
        return await self._follow(ticket, gone, notify, record, max_wait_s, resumed)

    async def requeue(
        self,
        ticket: Ticket,
        refused: Assignment,
        gone: asyncio.Event,
        notify: Notify,
        *,
        record: Tracked | None = None,
        max_wait_s: float | None = None,
        lost: bool = False,
    ) -> tuple[Assignment, Ticket]:
        """The worker assigned to ``ticket`` did not take the session (it refused it at the
        handshake, or, ``lost``, could not be reached): the client goes back to its place in the
        queue, ahead of everyone who came after it, and waits for the next worker as ``acquire``
        does (the same notices and errors). Either way ``refused`` is no longer the caller's to
        release. Raises TicketCancelled if the place is no longer this gateway's to put back
        (nothing is held twice)."""
        try:
            # put back even when its client left meanwhile: the wait below then gives it up
            again = await self.store.requeue(ticket, refused, lost=lost)
            if again is None:
                raise TicketCancelled(f"ticket {ticket.ticket_id} could not go back to its place")
        except BaseException:
            if record is not None:
                record.idle()
            raise
        return await self._follow(again, gone, notify, record, max_wait_s, resumed=False)

    async def _follow(
        self,
        ticket: Ticket,
        gone: asyncio.Event,
        notify: Notify,
        record: Tracked | None,
        max_wait_s: float | None,
        resumed: bool,
    ) -> tuple[Assignment, Ticket]:
        """Wait for a queued ticket's worker; the session's record and notices follow along."""
        try:
            if record is not None:
                record.queued(ticket.ticket_id)
            was_queued = not ticket.future.done()
            worker = await self._wait(ticket, gone, notify, max_wait_s, resumed)
        except BaseException:
            if record is not None:
                record.idle()
            raise
        if record is not None:
            record.active(worker.worker_id, ticket.ticket_id)
        waited = self.store.clock() - ticket.enqueued_at
        self.metrics.queue_wait.labels(ticket.task_type).observe(waited)
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
        self, ticket: Ticket, gone: asyncio.Event, notify: Notify, max_wait_s: float | None, resumed: bool
    ) -> Assignment:
        if ticket.future.done() and not gone.is_set():
            return ticket.future.result()
        leaving = asyncio.ensure_future(gone.wait())
        watch: _Watch | None = None
        try:
            where = await self.store.place(ticket)
            if not ticket.future.done():  # (a store that awaits may have assigned it meanwhile)
                position, wait = where.places.get(ticket.ticket_id, (0, 0.0))
                token = self.tokens.make(ticket.ticket_id) if self.resume_grace_s > 0 else None
                notify(
                    QueueNotice(
                        "queued",
                        ticket.ticket_id,
                        position,
                        where.queue_length,
                        wait,
                        resume_token=token,
                        resumed=resumed,
                    )
                )
                watch = _Watch(notify, position, asyncio.get_running_loop().time())
                self._watching[ticket.ticket_id] = watch
            waits: set[asyncio.Future[Any]] = {ticket.future, leaving}
            await asyncio.wait(waits, timeout=max_wait_s, return_when=asyncio.FIRST_COMPLETED)
            if leaving.done():
                await self._let_go(ticket)
                raise ClientGone()
            if not ticket.future.done():
                await self.store.withdraw(ticket)
                raise SessionLimitReached(
                    f"no worker became free within {max_wait_s:g} s", waited_s=max_wait_s
                )
            return ticket.future.result()  # raises TicketCancelled if it was cancelled
        except asyncio.CancelledError:
            # the waiter is going (its connection ended, or shutdown): give back what it holds
            await self._let_go(ticket)
            raise
        finally:
            if watch is not None and self._watching.get(ticket.ticket_id) is watch:
                del self._watching[ticket.ticket_id]  # (not a new connection's, for the same place)
            leaving.cancel()

    async def _let_go(self, ticket: Ticket) -> None:
        """Its client left while it waited: the place is kept for the client to come back (with
        resume on), a worker assigned meanwhile goes back, never handed on."""
        if self.resume_grace_s > 0:
            await self.store.orphan(ticket, self.resume_grace_s)
        else:
            await self.store.withdraw(ticket)

    async def run(self) -> None:
        """The notifier: a round after each (coalesced) change, and a check every half interval.
        A round that fails (the store is unreachable) is skipped: notices are a courtesy."""
        loop = asyncio.get_running_loop()
        took = 0.0
        while True:
            await self.store.wait_changed(self.interval_s / 2)
            await asyncio.sleep(max(self.coalesce_s, 4 * took))
            started = loop.time()
            try:
                await self.notify_round()
            except OmnivoxError:
                continue
            except Exception:  # a bug must not silence every later notice
                log.exception("queue notices: a round failed")
                continue
            finally:
                took = loop.time() - started

    async def notify_round(self) -> None:
        """Tell each waiting client its place if it moved (at once near the head, at most every
        third of ``interval_s`` further back), or if it last heard ``interval_s`` ago."""
        if not self._watching:
            return
        where = await self.store.positions(list(self._watching))
        now = asyncio.get_running_loop().time()
        sent = 0
        for ticket_id, watch in list(self._watching.items()):
            entry = where.places.get(ticket_id)
            if entry is None:
                continue  # assigned or cancelled: its waiter takes over
            position, wait = entry
            quiet = now - watch.sent_at
            moved = position != watch.position and (position <= HEAD or quiet >= self.interval_s / 3)
            if moved or quiet >= self.interval_s:
                watch.notify(self._notice("queue_update", ticket_id, position, where.queue_length, wait))
                watch.position, watch.sent_at = position, now
                sent += 1
                if sent % _SLICE == 0:
                    await asyncio.sleep(0)

    @staticmethod
    def _notice(kind: NoticeKind, ticket_id: str, position: int, length: int, wait: float) -> QueueNotice:
        return QueueNotice(kind, ticket_id, position, length, wait)
