"""The Redis scheduler store: several gateways share one queue, one worker registry, assignments
and ETA figures. Every mutation is one call of ``scheduler.lua`` ending in its one dispatch step, so
Redis is the single dispatch point whichever gateway sends the operation.

This gateway keeps only what it owns: the tickets of its waiting clients (each with an
``asyncio.Future``) and the assignments whose sessions it relays. An assignment reaches it in the
script's reply when its own operation made it, and otherwise through its inbox stream (read by one
task, ``XREAD BLOCK``); either way, once: an event for a ticket already resolved is ignored, one for
a ticket nobody here waits for any more gives the worker back.

Store trouble: operations raise ``StoreUnavailable``; releases, withdrawals and lost workers are
kept and retried in order until the store answers (each is guarded, so a late one never frees a
later session). Leases, reaping and re-assertion after a restarted store: ``membership``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from omnivox.core.errors import (
    QueueFull,
    StoreUnavailable,
    TicketCancelled,
    TooManyWorkers,
    WorkerUnavailable,
)
from omnivox.core.ids import new_id
from omnivox.gateway.cluster import codec
from omnivox.gateway.cluster.connection import StoreUrl, aioredis, reaching
from omnivox.gateway.cluster.inbox import Inbox
from omnivox.gateway.cluster.membership import Membership
from omnivox.gateway.cluster.pending import Pending
from omnivox.gateway.cluster.scripts import SHARED_OPS, Scripts, scheduler_source, shared_source
from omnivox.gateway.scheduling.eta import DurationModel, WaitPlan
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
from omnivox.protocol.control.workers import TASKS, Capabilities, WorkerHealth, WorkerState

log = logging.getLogger(__name__)

_CHANGE_POLL_S = 0.05  # how often a waiting notifier looks at the store's change counter
_DEFAULT_CAPS = Capabilities()


@dataclass
class _Waiting:
    """A ticket of this gateway's client, not assigned yet (seq 0: its enqueue has not answered)."""

    ticket: Ticket
    seq: int = 0
    enq_ms: int = 0
    reasserted_ms: int = 0  # put back after a reap: an assignment of it made before was undone
    refused: Assignment | None = None  # put back after its worker refused this one: never taken again
    # when the refused one was made: a store restarted empty may give the same worker and epoch
    # again (it learns the epoch from the worker, which never saw the refused one), made later
    refused_ms: int = 0

    def undone(self, given: Assignment, busy_ms: int) -> bool:
        """Made before this gateway was reaped (the reap undid it), or the one its worker refused
        (its event read late)."""
        return busy_ms < self.reasserted_ms or (given == self.refused and busy_ms <= self.refused_ms)


@dataclass
class _Serving:
    """An assignment whose session this gateway relays."""

    assignment: Assignment
    seq: int
    enq_ms: int
    busy_ms: int


class RedisStore:
    kind = "redis"

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "{ovx}",
        url: StoreUrl | None = None,
        gateway_id: str | None = None,
        max_queue_size: int = 1000,
        max_workers: int = 64,
        durations: DurationModel | None = None,
        clock: Callable[[], float] | None = None,
        lease_s: float = 3.0,
        resume_grace_s: float = 0.0,
        info: dict[str, Any] | None = None,
        background: bool = True,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.url = url
        self.gateway_id = gateway_id or new_id("g")
        self.max_queue_size = max_queue_size
        self.max_workers = max_workers
        self.model = durations or DurationModel()
        self.scripts = Scripts(client, prefix, scheduler_source(self.model.alpha))
        self.shared = Scripts(client, prefix, shared_source())  # keys, limits, calls
        # a clock given (tests) is the store's time too; otherwise the server's clock is
        self._given_clock = clock
        self.clock: Callable[[], float] = clock or time.monotonic
        self.lease_s = lease_s
        # how long a waiter of a dead gateway keeps its place for its client to come back (0: none)
        self.resume_grace_ms = round(resume_grace_s * 1000)
        self.info = {"gateway_id": self.gateway_id, **(info or {})}
        self.background = background
        self.up = True
        self._waiting: dict[str, _Waiting] = {}
        self._serving: dict[str, _Serving] = {}
        self.pending = Pending(self.call, self.resolve)  # operations to retry, in order
        self.inbox = Inbox(client, f"{prefix}:gw:{self.gateway_id}:inbox", self._assigned, self._cancelled)
        self.membership = Membership(self)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._seen_version: str | None = None
        self._plan: WaitPlan | None = None  # the last pass's estimate, grown as tickets join the tail
        self._plan_at = 0.0
        # what else this gateway keeps in the store (limits, calls): renewed after every beat, put
        # back (``lost``) when the store lost it
        self.beat_hooks: list[Callable[[bool], Awaitable[None]]] = []

    # ---- life

    async def start(self) -> None:
        with contextlib.suppress(StoreUnavailable):  # an unreachable store: the loop keeps trying
            await self.membership.beat()
        if self.background:
            self._spawn(self.inbox.run())
            self._spawn(self.membership.run())

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            # (bounded: a blocking read cancelled on a connection that went bad in a pause can hang
            # in the client library; the connections are closed below either way)
            await asyncio.wait(tasks, timeout=1.0)
        with contextlib.suppress(StoreUnavailable):
            await self.pending.retry()
            # what it held goes at once, not after its lease
            await self.call("leave", self.gateway_id, self.resume_grace_ms)
        await self.client.aclose()

    # ---- calls

    def now_ms(self) -> int:
        """The time the scripts use: the given clock's, else -1 (the server's own clock)."""
        return -1 if self._given_clock is None else round(self._given_clock() * 1000)

    async def call(self, op: str, *args: str | int | float) -> Any:
        """Run an operation (of the scheduler script, or the shared one: keys, limits, calls);
        raises ``StoreUnavailable``."""
        script = self.shared if op in SHARED_OPS else self.scripts
        try:
            reply = await script.call(op, self.now_ms(), *args)
        except StoreUnavailable:
            self.up = False
            raise
        self.up = True
        return reply

    # ---- tickets

    async def enqueue(self, task_type: str, history_hash: str | None = None) -> Ticket:
        if task_type not in TASKS:
            raise ValueError(f"unknown task type {task_type!r}")
        tid = new_id("t")
        future: asyncio.Future[Assignment] = asyncio.get_running_loop().create_future()
        ticket = Ticket(tid, task_type, history_hash, future, self.clock())
        waiting = self._waiting[tid] = _Waiting(ticket)  # before the call: its event may come first
        args = (self.gateway_id, tid, task_type, history_hash or "", self.max_queue_size)
        try:
            reply = await self.call("enqueue", *args)
        except StoreUnavailable:
            del self._waiting[tid]
            # it may have been queued before the reply was lost
            self.pending.later("withdraw", tid, self.gateway_id)
            raise
        except BaseException:
            # cancelled while the store ran it (its client left mid-call): it may be queued, even
            # assigned already; kept here, a waiter nobody awaits would take its worker for good
            # (and be re-asserted with every store restart)
            self._forget(tid)
            raise
        if reply[0] == "no_capable_worker":
            del self._waiting[tid]
            raise WorkerUnavailable(f"no worker in the pool can serve {task_type!r} sessions")
        if reply[0] == "queue_full":
            del self._waiting[tid]
            raise QueueFull(
                f"the queue is full ({self.max_queue_size} waiting)", max_queue_size=self.max_queue_size
            )
        waiting.seq, waiting.enq_ms = int(reply[1]), int(reply[3])
        ticket.seq = waiting.seq
        self.resolve(reply[2])
        return ticket

    def resolve(self, entries: list[Any]) -> None:
        """Assignments a script made: this gateway's waiters get theirs (others read their inbox)."""
        for entry in entries:
            given, gateway, busy_ms = codec.assignment(entry)
            if gateway == self.gateway_id:
                self._assigned(given, busy_ms)

    def _assigned(self, given: Assignment, busy_ms: int) -> None:
        waiting = self._waiting.get(given.ticket_id)
        if waiting is not None and waiting.undone(given, busy_ms):
            return
        self._waiting.pop(given.ticket_id, None)
        if waiting is None:
            serving = self._serving.get(given.ticket_id)
            if serving is None or serving.assignment != given:
                # nobody here waits for it any more (the waiter left, its enqueue's reply was lost,
                # or it is served already under an older assignment): the worker goes back
                self._spawn(self.pending.run("release", given.worker_id, given.ticket_id, "1", "", "1"))
            return
        ticket = waiting.ticket
        ticket.worker_id, ticket.cache_hit = given.worker_id, given.cache_hit
        self._serving[given.ticket_id] = _Serving(given, waiting.seq, waiting.enq_ms, busy_ms)
        if not ticket.future.done():
            ticket.future.set_result(given)

    def _cancelled(self, ticket_id: str) -> None:
        waiting = self._waiting.pop(ticket_id, None)
        if waiting is not None and not waiting.ticket.future.done():
            waiting.ticket.future.set_exception(TicketCancelled(f"ticket {ticket_id} was cancelled"))
            waiting.ticket.future.exception()  # marked retrieved: a waiter that vanished must not warn

    async def cancel(self, ticket_id: str) -> bool:
        reply = await self.call("cancel", ticket_id)
        if int(reply[0]) != 1:
            return False
        self._cancelled(ticket_id)  # ours: said at once (its inbox event then finds nothing)
        self.resolve(reply[1])
        return True

    async def withdraw(self, ticket: Ticket) -> None:
        future = ticket.future
        if future.done():
            waiting = self._waiting.get(ticket.ticket_id)
            if waiting is not None and waiting.ticket is ticket:  # (not a new connection's)
                del self._waiting[ticket.ticket_id]
            if not future.cancelled() and future.exception() is None:
                await self.release(future.result())
            return
        self._cancelled(ticket.ticket_id)  # as the memory store: its future says cancelled
        await self.pending.run("withdraw", ticket.ticket_id, self.gateway_id)

    async def orphan(self, ticket: Ticket, grace_s: float) -> None:
        if ticket.future.done():
            await self.withdraw(ticket)
            return
        self._cancelled(ticket.ticket_id)  # its waiter is gone; an assignment now gives the worker back
        await self.pending.run("orphan", ticket.ticket_id, round(grace_s * 1000), self.gateway_id)

    async def reattach(self, ticket_id: str, task_type: str) -> Ticket | None:
        future: asyncio.Future[Assignment] = asyncio.get_running_loop().create_future()
        ticket = Ticket(ticket_id, task_type, None, future, self.clock())
        old = self._waiting.get(ticket_id)  # its old connection here, not seen gone yet
        waiting = self._waiting[ticket_id] = _Waiting(ticket)  # before the call: its event may come first
        try:
            reply = await self.call("reattach", self.gateway_id, ticket_id, task_type)
        except StoreUnavailable:
            self._restore(ticket_id, old)
            raise
        except BaseException:
            if old is None:
                self._forget(ticket_id)  # cancelled mid-call: as enqueue
            else:
                self._restore(ticket_id, old)  # its old connection here still waits for it
            raise
        if reply[0] != "ok":
            self._restore(ticket_id, old)
            return None
        if old is not None and not old.ticket.future.done():
            old.ticket.future.set_exception(TicketCancelled(f"ticket {ticket_id} went to a new connection"))
            old.ticket.future.exception()  # marked retrieved: the old waiter may be gone already
        waiting.seq, waiting.enq_ms = int(reply[1]), int(reply[3])
        ticket.seq = waiting.seq
        self.resolve(reply[2])
        return ticket

    async def requeue(self, ticket: Ticket, refused: Assignment, *, lost: bool = False) -> Ticket | None:
        serving = self._serving.get(ticket.ticket_id)
        if serving is None or serving.assignment != refused:
            return None  # released, or relayed under another assignment: not this one to put back
        future: asyncio.Future[Assignment] = asyncio.get_running_loop().create_future()
        again = Ticket(ticket.ticket_id, ticket.task_type, ticket.history_hash, future, ticket.enqueued_at)
        again.seq = serving.seq
        del self._serving[ticket.ticket_id]
        # waiting before the call: its next assignment's event may come first
        self._waiting[ticket.ticket_id] = _Waiting(
            again, serving.seq, serving.enq_ms, refused=refused, refused_ms=serving.busy_ms
        )
        args = (
            self.gateway_id,
            ticket.ticket_id,
            refused.worker_id,
            refused.epoch,
            ticket.task_type,
            ticket.history_hash or "",
            serving.seq,
            serving.enq_ms,
            "1" if lost else "0",
        )
        try:
            reply = await self.call("requeue", *args)
        except StoreUnavailable:
            self._waiting.pop(ticket.ticket_id, None)
            self.pending.later("withdraw", ticket.ticket_id, self.gateway_id)  # it may have run
            raise
        except BaseException:
            self._forget(ticket.ticket_id)  # cancelled mid-call: as enqueue
            raise
        if reply[0] != "ok":
            self._waiting.pop(ticket.ticket_id, None)
            return None
        self.resolve(reply[1])
        return again

    def _forget(self, ticket_id: str) -> None:
        """A ticket whose caller is gone before it heard back: nothing here holds it any more, and
        the store gives back its place or its worker (guarded by the ticket: never a later one's)."""
        self._waiting.pop(ticket_id, None)
        self._serving.pop(ticket_id, None)
        self._spawn(self.pending.run("withdraw", ticket_id, self.gateway_id))

    def _restore(self, ticket_id: str, old: _Waiting | None) -> None:
        if old is None:
            self._waiting.pop(ticket_id, None)
        else:
            self._waiting[ticket_id] = old

    async def release(
        self, assignment: Assignment, *, cached_hash: str | None = KEEP, confirmed: bool = True
    ) -> None:
        self._serving.pop(assignment.ticket_id, None)
        keep = cached_hash is KEEP
        cached = "" if keep or cached_hash is None else cached_hash
        args = (
            assignment.worker_id,
            assignment.ticket_id,
            "1" if keep else "0",
            cached,
            "1" if confirmed else "0",
        )
        await self.pending.run("release", *args)

    async def worker_lost(self, assignment: Assignment) -> None:
        self._serving.pop(assignment.ticket_id, None)
        await self.pending.run("mark_offline", assignment.worker_id, str(assignment.epoch))

    async def set_paused(self, assignment: Assignment, paused: bool) -> None:
        await self.pending.run(
            "set_paused", assignment.worker_id, assignment.ticket_id, "1" if paused else "0"
        )

    def note_paused(self, assignment: Assignment, paused: bool) -> None:
        self._spawn(self.set_paused(assignment, paused))

    # ---- workers

    async def register(self, url: str, wished_id: str | None = None) -> tuple[str, bool]:
        caps = _DEFAULT_CAPS.model_dump_json()
        reply = await self.call(
            "register", url, wished_id or "", new_id("w"), self.max_workers, caps, codec.able(_DEFAULT_CAPS)
        )
        if reply[0] == "too_many_workers":
            raise TooManyWorkers(f"the gateways hold their limit of {self.max_workers} workers")
        return reply[1], int(reply[2]) == 1

    async def report_health(self, worker_id: str, health: WorkerHealth) -> WorkerView | None:
        reply = await self.call(
            "report_health",
            worker_id,
            health.state.value,
            health.error or "",
            health.engine,
            health.capabilities.model_dump_json(),
            codec.able(health.capabilities),
            json.dumps(health.voices),
            health.kv_length,
            health.cached_hash or "",
            health.epoch,
            json.dumps(health.problems),
        )
        if not reply:
            return None
        self.resolve(reply[1])
        return codec.worker_view(worker_id, codec.pairs(reply[0]), await self._now_ms())

    async def report_unreachable(self, worker_id: str, offline_after: int) -> None:
        reply = await self.call("report_unreachable", worker_id, offline_after)
        self.resolve(reply[1])

    async def forget_offline(self, after_s: float) -> list[WorkerView]:
        gone = await self.call("forget_offline", round(after_s * 1000))
        return [WorkerView(worker_id=wid, url=url, state=WorkerState.OFFLINE) for wid, url in gone]

    async def monitored(self) -> list[tuple[str, str]]:
        mine = await self.call("monitors", self.gateway_id, round(self.lease_s * 1000))
        return [(wid, url) for wid, url in mine]

    async def set_pipeline(self, report: PipelineReport) -> None:
        slots = "" if report.session_slots is None else str(report.session_slots)
        reply = await self.call("set_pipeline", report.model_dump_json(), slots)
        self.resolve(reply[1])

    # ---- views

    async def _now_ms(self) -> int:
        given = self.now_ms()
        if given >= 0:
            return given
        async with reaching("time"):
            seconds, micros = await self.client.time()
        return seconds * 1000 + micros // 1000

    async def pipeline(self) -> PipelineState | None:
        reply = await self.call("pipeline")
        if not reply:
            return None
        report, at_ms, _slots, used, now_ms = reply
        age = (int(now_ms) - int(at_ms)) / 1000
        return PipelineState(PipelineReport.model_validate_json(report), age, int(used))

    async def session_slots(self) -> int | None:
        reply = await self.call("pipeline")
        return int(reply[2]) if reply and reply[2] else None

    async def workers(self) -> list[WorkerView]:
        now_ms, entries = await self.call("workers")
        return [codec.worker_view(wid, codec.pairs(h), int(now_ms), mon) for wid, h, mon in entries]

    async def _places(self) -> list[tuple[str, str, int, float]]:
        state = await self.call("queue_state")
        places, self._plan = codec.queue_places(state, self.model.alpha, self.model.min_samples)
        self._plan_at = self.clock()
        return places

    async def queue(self) -> list[TicketView]:
        places = await self._places()
        now_ms, hashes = await self.call("tickets", *[tid for tid, *_ in places])
        views = []
        for (tid, task, position, wait), flat in zip(places, hashes, strict=True):
            h = codec.pairs(flat)
            waited = round((int(now_ms) - int(h["enq_ms"])) / 1000, 3) if h else 0.0
            views.append(TicketView(tid, task, position, wait, waited, gateway=h.get("gw")))
        return views

    async def ticket(self, ticket_id: str) -> TicketView | None:
        now_ms, (flat,) = await self.call("tickets", ticket_id)
        h = codec.pairs(flat)
        if not h:
            return None
        position, wait = 0, 0.0
        if h["state"] == "queued":
            place = next((p for p in await self._places() if p[0] == ticket_id), None)
            if place is not None:
                position, wait = place[2], place[3]
        return TicketView(
            ticket_id=ticket_id,
            task_type=h["task"],
            position=position,
            estimated_wait_s=wait,
            waited_s=round((int(now_ms) - int(h["enq_ms"])) / 1000, 3),
            worker_id=h.get("worker") or None,
            gateway=h.get("gw"),
        )

    async def positions(self, ticket_ids: list[str]) -> Positions:
        """This gateway's own tickets from the packed pass; any other through the full one."""
        mine = {w.seq: tid for tid in ticket_ids if (w := self._waiting.get(tid)) is not None and w.seq}
        if len(mine) < len(ticket_ids):
            places = await self._places()
            wanted = set(ticket_ids)
            return Positions(len(places), {tid: (pos, wait) for tid, _, pos, wait in places if tid in wanted})
        state = await self.call("queue_seqs")
        length, where, self._plan = codec.seq_places(state, mine, self.model.alpha, self.model.min_samples)
        self._plan_at = self.clock()
        return Positions(length, where)

    async def place(self, ticket: Ticket) -> Positions:
        waiting = self._waiting.get(ticket.ticket_id)
        if waiting is None or not waiting.seq:
            return Positions(await self.queue_length(), {})
        if self._plan is None:  # no pass yet: this one, which has it already
            return await self.positions([ticket.ticket_id])
        before, total = await self.call("rank", waiting.seq)
        wait = self._plan.add(ticket.task_type) - (self.clock() - self._plan_at)
        return Positions(int(total), {ticket.ticket_id: (int(before) + 1, round(max(0.0, wait), 1))})

    async def queue_length(self) -> int:
        return int(await self.call("queue_length"))

    async def wait_changed(self, within_s: float) -> None:
        """Polls the store's change counter (a missed change is seen by the next round anyway)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(_CHANGE_POLL_S, left))
            try:
                async with reaching("changes"):
                    version: Any = await self.client.get(f"{self.prefix}:ver")
            except StoreUnavailable:
                continue
            if version != self._seen_version:
                self._seen_version = version
                return

    async def status(self) -> dict[str, Any]:
        return await self.membership.status(
            self.url.redacted if self.url else None, self.up, len(self.pending)
        )

    # ---- what this gateway holds (re-asserted after the store lost it)

    def held(self) -> tuple[list[_Waiting], list[_Serving]]:
        waiting = [w for w in self._waiting.values() if w.seq and not w.ticket.future.done()]
        return waiting, list(self._serving.values())

    async def poll_inbox(self) -> int:
        """Read this gateway's inbox once without waiting (tests step through it)."""
        return await self.inbox.poll()

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
