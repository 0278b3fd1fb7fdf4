"""The in-memory scheduler store: one gateway's ``WorkerPool`` behind the ``SchedulerStore``
interface. The default (``omnivox serve`` needs no other server).

Its methods never await: each runs to the end in one step of the event loop, as the pool always has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omnivox.core.ids import new_id
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.store import (
    KEEP,
    Assignment,
    PipelineState,
    Positions,
    Ticket,
    TicketView,
    WorkerView,
)
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import WorkerHealth, WorkerState


class MemoryStore:
    kind = "memory"

    def __init__(self, pool: WorkerPool | None = None, gateway_id: str | None = None) -> None:
        self.pool = pool or WorkerPool()
        self.gateway_id = gateway_id or new_id("g")
        self._report: PipelineReport | None = None
        self._report_at = 0.0

    @property
    def max_queue_size(self) -> int:
        return self.pool.max_queue_size

    @property
    def clock(self) -> Callable[[], float]:
        return self.pool.clock

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    # ---- tickets

    async def enqueue(self, task_type: str, history_hash: str | None = None) -> Ticket:
        return self.pool.enqueue(task_type, history_hash)

    async def cancel(self, ticket_id: str) -> bool:
        return self.pool.cancel(ticket_id)

    async def withdraw(self, ticket: Ticket) -> None:
        future = ticket.future
        if not future.done():
            if self.pool.ticket(ticket.ticket_id) is ticket:  # (not if a new connection took it)
                self.pool.cancel(ticket.ticket_id)
        elif not future.cancelled() and future.exception() is None:
            await self.release(future.result())

    async def orphan(self, ticket: Ticket, grace_s: float) -> None:
        if ticket.future.done() or not self.pool.orphan(ticket, grace_s):
            await self.withdraw(ticket)

    async def reattach(self, ticket_id: str, task_type: str) -> Ticket | None:
        return self.pool.reattach(ticket_id, task_type)

    async def requeue(self, ticket: Ticket, refused: Assignment, *, lost: bool = False) -> Ticket | None:
        return self.pool.requeue(ticket, refused, lost=lost)

    async def release(
        self, assignment: Assignment, *, cached_hash: str | None = KEEP, confirmed: bool = True
    ) -> None:
        worker = self.pool.workers.get(assignment.worker_id)
        if worker is not None:
            self.pool.release(
                worker, cached_hash=cached_hash, ticket_id=assignment.ticket_id, confirmed=confirmed
            )

    async def worker_lost(self, assignment: Assignment) -> None:
        worker = self.pool.workers.get(assignment.worker_id)
        if worker is not None and worker.epoch == assignment.epoch:
            self.pool.mark_offline(worker)

    async def set_paused(self, assignment: Assignment, paused: bool) -> None:
        self.note_paused(assignment, paused)

    def note_paused(self, assignment: Assignment, paused: bool) -> None:
        worker = self.pool.workers.get(assignment.worker_id)
        if worker is not None and worker.ticket_id == assignment.ticket_id:
            self.pool.set_paused(worker, paused)

    # ---- workers

    async def register(self, url: str, wished_id: str | None = None) -> tuple[str, bool]:
        known = any(w.url == url for w in self.pool.workers.values())
        return self.pool.add_worker(url, wished_id).worker_id, not known

    async def report_health(self, worker_id: str, health: WorkerHealth) -> WorkerView | None:
        worker = self.pool.workers.get(worker_id)
        if worker is None:
            return None
        self.pool.apply_health(worker, health)
        return worker.view(self.pool.clock())

    async def report_unreachable(self, worker_id: str, offline_after: int) -> None:
        worker = self.pool.workers.get(worker_id)
        if worker is not None:
            self.pool.report_unreachable(worker, offline_after)

    async def forget_offline(self, after_s: float) -> list[WorkerView]:
        now = self.pool.clock()
        gone = [
            w
            for w in self.pool.workers.values()
            if w.state is WorkerState.OFFLINE
            and w.offline_since is not None
            and now - w.offline_since > after_s
        ]
        for w in gone:
            self.pool.remove_worker(w.worker_id)
        return [w.view(now) for w in gone]

    async def monitored(self) -> list[tuple[str, str]]:
        return [(w.worker_id, w.url) for w in self.pool.workers.values()]

    async def set_pipeline(self, report: PipelineReport) -> None:
        self._report, self._report_at = report, self.pool.clock()
        self.pool.set_session_slots(report.session_slots)

    # ---- views

    async def pipeline(self) -> PipelineState | None:
        if self._report is None:
            return None
        return PipelineState(self._report, self.pool.clock() - self._report_at, self.pool.slots_used())

    async def session_slots(self) -> int | None:
        return self.pool.session_slots

    async def workers(self) -> list[WorkerView]:
        now = self.pool.clock()
        return [w.view(now) for w in self.pool.workers.values()]

    async def queue(self) -> list[TicketView]:
        now = self.pool.clock()
        views = []
        for t in self.pool.queued():
            position, wait = self.pool.position(t.ticket_id) or (0, 0.0)  # waits as of now
            views.append(
                TicketView(
                    ticket_id=t.ticket_id,
                    task_type=t.task_type,
                    position=position,
                    estimated_wait_s=wait,
                    waited_s=round(now - t.enqueued_at, 3),
                    gateway=self.gateway_id,
                )
            )
        return views

    async def ticket(self, ticket_id: str) -> TicketView | None:
        t = self.pool.ticket(ticket_id)
        if t is None:
            return None
        pos = self.pool.position(ticket_id)
        return TicketView(
            ticket_id=t.ticket_id,
            task_type=t.task_type,
            position=pos[0] if pos else 0,
            estimated_wait_s=pos[1] if pos else 0.0,
            waited_s=round(self.pool.clock() - t.enqueued_at, 3),
            worker_id=t.worker_id,
            gateway=self.gateway_id,
        )

    async def positions(self, ticket_ids: list[str]) -> Positions:
        places = {}
        for ticket_id in ticket_ids:
            entry = self.pool.position(ticket_id)
            if entry is not None:
                places[ticket_id] = entry
        return Positions(self.pool.queue_length, places)

    async def place(self, ticket: Ticket) -> Positions:
        return await self.positions([ticket.ticket_id])  # the snapshot grows in place at the tail

    async def queue_length(self) -> int:
        return self.pool.queue_length

    async def wait_changed(self, within_s: float) -> None:
        await self.pool.wait_changed(within_s)

    async def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "up": True, "gateways": [{"gateway_id": self.gateway_id, "self": True}]}
