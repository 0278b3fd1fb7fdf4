"""Admission: get a worker for a session through the pool, telling the client where it stands."""

from __future__ import annotations

import asyncio
import contextlib

from omnivox.gateway.connection import ClientConnection
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.pool import Ticket, WorkerPool, WorkerRecord
from omnivox.gateway.sessions import SessionRecord
from omnivox.protocol.queue import Queued, QueueDone, QueueUpdate


class ClientGone(Exception):
    """The client disconnected (or closed) while its ticket was queued; the ticket is cancelled."""


async def acquire_worker(
    pool: WorkerPool,
    conn: ClientConnection,
    metrics: GatewayMetrics,
    task_type: str,
    history_hash: str | None = None,
    update_interval_s: float = 3.0,
    record: SessionRecord | None = None,
) -> tuple[WorkerRecord, Ticket]:
    """Enqueue and wait. Sends queued / queue_update (on every change, at least every interval) /
    queue_done. Raises QueueFull, WorkerUnavailable, TicketCancelled or ClientGone.

    ``record`` (the session's entry in the gateway's session registry) follows along: queued while
    the ticket waits, active once a worker is assigned, idle again if admission fails."""
    try:
        ticket = pool.enqueue(task_type, history_hash)
        if record is not None:
            record.queued(ticket.ticket_id)
        worker = await _admit(pool, conn, ticket, update_interval_s)
    except BaseException:
        if record is not None:
            record.idle()
        raise
    if record is not None:
        record.active(worker.worker_id, ticket.ticket_id)
    waited = pool.clock() - ticket.enqueued_at
    metrics.queue_wait.labels(task_type).observe(waited)
    conn.send(
        QueueDone(ticket_id=ticket.ticket_id, worker_id=worker.worker_id, waited_s=round(waited, 3)).dump()
    )
    return worker, ticket


async def _admit(
    pool: WorkerPool, conn: ClientConnection, ticket: Ticket, update_interval_s: float
) -> WorkerRecord:
    if not ticket.future.done():
        position, wait = pool.position(ticket.ticket_id) or (0, 0.0)
        conn.send(
            Queued(
                ticket_id=ticket.ticket_id,
                position=position,
                queue_length=pool.queue_length,
                estimated_wait_s=wait,
            ).dump()
        )
        await _wait(pool, conn, ticket, (position, wait), update_interval_s)
    return ticket.future.result()  # raises TicketCancelled if it was cancelled


async def _wait(
    pool: WorkerPool, conn: ClientConnection, ticket: Ticket, last: tuple[int, float], interval: float
) -> None:
    loop = asyncio.get_running_loop()
    last_sent = loop.time()
    gone = asyncio.ensure_future(conn.gone.wait())
    try:
        while not ticket.future.done():
            changed = asyncio.ensure_future(
                pool.wait_changed(max(0.05, interval - (loop.time() - last_sent)))
            )
            await asyncio.wait({ticket.future, gone, changed}, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if gone.done() and not ticket.future.done():
                pool.cancel(ticket.ticket_id)
                raise ClientGone()
            now = pool.position(ticket.ticket_id)
            if now is None:
                continue
            if now != last or loop.time() - last_sent >= interval:
                conn.send(
                    QueueUpdate(
                        ticket_id=ticket.ticket_id,
                        position=now[0],
                        queue_length=pool.queue_length,
                        estimated_wait_s=now[1],
                    ).dump()
                )
                last, last_sent = now, loop.time()
    finally:
        if not ticket.future.done():  # cancelled from outside (shutdown): give the place back
            pool.cancel(ticket.ticket_id)
        gone.cancel()
        with contextlib.suppress(BaseException):
            await gone
