"""Property-based test of the worker pool: random enqueue / cancel / release / lost / back events."""

from __future__ import annotations

import asyncio

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from omnivox.core.errors import QueueFull, TicketCancelled
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.protocol.control.workers import Capabilities

MAX_QUEUE = 4
N_WORKERS = 3


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.now = 0.0
        self.pool = WorkerPool(max_queue_size=MAX_QUEUE, clock=lambda: self.now, loop=self.loop)
        self.workers = []
        for i in range(N_WORKERS):
            w = self.pool.add_worker(f"http://w{i}")
            w.capabilities = Capabilities(streaming=True, duplex=True)
            self.pool.report_health(w, WorkerState.IDLE)
            self.workers.append(w)
        self.enqueued: list[str] = []  # ticket ids in enqueue order
        self.tickets: dict[str, object] = {}
        self.cancelled: set[str] = set()
        self.dispatch_order: list[str] = []
        self.holder: dict[str, str] = {}  # worker id -> ticket id it serves

    def teardown(self) -> None:
        self.loop.close()

    def _collect(self) -> None:
        """Record newly resolved futures, in the order the pool assigned them."""
        for tid in self.enqueued:
            t = self.tickets[tid]
            if t.worker_id is not None and tid not in self.dispatch_order:
                assert t.future.done() and not t.future.cancelled()
                assert t.future.result().worker_id == t.worker_id
                self.dispatch_order.append(tid)
                assert t.worker_id not in self.holder, "worker assigned twice"
                self.holder[t.worker_id] = tid

    @rule(
        task=st.sampled_from(["streaming", "streaming", "audio_duplex"]), h=st.sampled_from([None, "a", "b"])
    )
    def enqueue(self, task: str, h: str | None) -> None:
        self.now += 1
        before = self.pool.queue_length
        try:
            ticket = self.pool.enqueue(task, h)
        except QueueFull:
            assert before == MAX_QUEUE
            return
        self.enqueued.append(ticket.ticket_id)
        self.tickets[ticket.ticket_id] = ticket
        self._collect()

    @precondition(lambda self: self.pool.queue_length > 0)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        tid = data.draw(st.sampled_from([t.ticket_id for t in self.pool.queued()]))
        assert self.pool.cancel(tid)
        self.cancelled.add(tid)
        assert isinstance(self.tickets[tid].future.exception(), TicketCancelled)
        self._collect()

    @precondition(lambda self: bool(self.holder))
    @rule(data=st.data(), h=st.sampled_from([None, "a", "b"]))
    def release(self, data: st.DataObject, h: str | None) -> None:
        # workers in creation order: their ids are random, so sorting them would make draws unrepeatable
        wid = data.draw(st.sampled_from([w.worker_id for w in self.workers if w.worker_id in self.holder]))
        self.now += 5
        del self.holder[wid]
        self.pool.release(self.pool.workers[wid], cached_hash=h)
        self._collect()

    @rule(i=st.integers(0, N_WORKERS - 1))
    def worker_lost(self, i: int) -> None:
        w = self.workers[i]
        self.holder.pop(w.worker_id, None)
        self.pool.mark_offline(w)
        assert w.state is WorkerState.OFFLINE and w.cached_hash is None
        self._collect()

    @rule(i=st.integers(0, N_WORKERS - 1))
    def worker_back(self, i: int) -> None:
        self.pool.report_health(self.workers[i], WorkerState.IDLE)
        self._collect()

    @invariant()
    def queue_bounded(self) -> None:
        assert self.pool.queue_length <= MAX_QUEUE

    @invariant()
    def no_worker_assigned_twice(self) -> None:
        busy = [w for w in self.workers if w.state.busy]
        assert {w.worker_id for w in busy} == set(self.holder)
        serving = [w.ticket_id for w in busy]
        assert len(serving) == len(set(serving))

    @invariant()
    def fifo_and_nothing_lost(self) -> None:
        queued = [t.ticket_id for t in self.pool.queued()]
        order = {tid: i for i, tid in enumerate(self.enqueued)}
        # the queue keeps enqueue order
        assert queued == sorted(queued, key=order.__getitem__)
        # every ticket is exactly one of: queued, dispatched, cancelled
        for tid in self.enqueued:
            states = [tid in queued, tid in self.dispatch_order, tid in self.cancelled]
            assert sum(states) == 1, (tid, states)
        assert not (self.cancelled & set(self.dispatch_order)), "dispatched after cancellation"
        # FIFO: tickets are dispatched in enqueue order (every worker here serves every task)
        assert self.dispatch_order == sorted(self.dispatch_order, key=order.__getitem__)
        if queued:
            assert not any(w.state is WorkerState.IDLE for w in self.workers), (
                "idle worker and a waiting ticket"
            )

    @invariant()
    def positions_are_consecutive(self) -> None:
        snap = self.pool.snapshot()
        assert sorted(p for p, _ in snap.values()) == list(range(1, self.pool.queue_length + 1))
        waits = [snap[t.ticket_id][1] for t in self.pool.queued()]
        assert waits == sorted(waits)


TestPool = PoolMachine.TestCase
TestPool.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
