"""The Redis store against the memory store, step by step (a hypothesis state machine).

Three gateways share one Redis store (a real redis-server); random operations come from any of them:
enqueues, cancels, withdrawals, releases (confirmed or not, with a cache), lost workers, health
reports, unreachable workers, pauses, the pipeline's slots, and a gateway dying (reaped at once: its
waiters leave, its workers stay busy until their health says free; a new gateway takes its place).
The memory store is fed the same linearized history. After every step: the same assignments (by
worker URL), the same queue with the same positions and waits, the same worker states, caches and
epochs; FIFO per task type; no worker holding two tickets. At the end, with everything given back,
no ticket, queue or gateway key is left in the store.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from omnivox.core.errors import OmnivoxError, TicketCancelled
from omnivox.gateway.scheduling.store import Ticket
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import WorkerState
from redis_server import RedisServer
from stores import health, memory_store, prefix, redis_store

MAX_QUEUE = 6
GATEWAYS = 3
TASK_TYPES = ["streaming", "streaming", "audio_duplex", "realtime"]
HASHES = [None, "a", "b"]
# (capabilities, engine) of each worker: a mixed pool, one on a staged pipeline
WORKERS = [
    ({"duplex": True}, "echo"),
    ({}, "echo"),
    ({"realtime": True, "streaming": False}, "pipeline"),
]

_server: RedisServer | None = None


@pytest.fixture(autouse=True)
def _redis(redis_db: RedisServer) -> None:
    global _server
    _server = redis_db


class Pair:
    """One client's ticket in both stores."""

    def __init__(self, gateway: int, task: str, memory: Ticket, redis: Ticket) -> None:
        self.gateway, self.task, self.memory, self.redis = gateway, task, memory, redis
        self.dead = False  # its gateway died: only the memory side is still looked at
        self.done = False  # released, lost or withdrawn


class Differential(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert _server is not None
        self.loop = asyncio.new_event_loop()
        self.now = 100.0
        self.key = prefix()
        self.memory = memory_store(self.clock, max_queue=MAX_QUEUE)
        self.redis = [self._gateway(i) for i in range(GATEWAYS)]
        self.pairs: list[Pair] = []
        self.urls = [f"http://w{i}" for i in range(len(WORKERS))]
        self.mem_ids: dict[str, str] = {}
        self.red_ids: dict[str, str] = {}
        self._run(self._setup())

    def clock(self) -> float:
        return self.now

    def _gateway(self, i: int) -> Any:
        assert _server is not None
        return redis_store(
            _server.unix_url, self.key, self.clock, max_queue=MAX_QUEUE, gateway_id=f"g{i}-{self.now}"
        )

    def _run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    async def _setup(self) -> None:
        await self.memory.start()
        for g in self.redis:
            await g.start()
        for url, (caps, engine) in zip(self.urls, WORKERS, strict=True):
            self.mem_ids[url], _ = await self.memory.register(url)
            self.red_ids[url], _ = await self.redis[0].register(url)
            await self.memory.report_health(self.mem_ids[url], health(engine=engine, **caps))
            await self.redis[0].report_health(self.red_ids[url], health(engine=engine, **caps))

    def teardown(self) -> None:
        try:
            self._run(self._give_back_everything())
            self._run(self._nothing_at_rest())
        finally:
            self._run(self._close())
            self.loop.close()

    async def _close(self) -> None:
        client = self.redis[0].client
        keys = [k async for k in client.scan_iter(match=f"{self.key}*")]
        if keys:
            await client.delete(*keys)
        for g in self.redis:
            await g.close()

    # ---- stepping

    def _step(self, work: Any) -> Any:
        result = self._run(work)
        self._run(self._deliver())
        return result

    async def _deliver(self) -> None:
        for g in self.redis:
            await g.poll_inbox()

    def _both(self, memory_call: Any, redis_call: Any) -> tuple[Any, Any]:
        """Run the same operation on both stores, at the same time (a second later than the last
        one): the same result, or the same error."""
        self.now += 1.0
        outcomes = []
        for call in (memory_call, redis_call):
            try:
                outcomes.append(("ok", self._step(call)))
            except OmnivoxError as err:
                outcomes.append(("error", type(err)))
        assert [o[0] for o in outcomes] == [o[0] for o in outcomes[:1]] * 2, outcomes
        if outcomes[0][0] == "error":
            assert outcomes[0][1] is outcomes[1][1], outcomes
            return None, None
        return outcomes[0][1], outcomes[1][1]

    def live(self, state: str) -> list[Pair]:
        """Pairs whose memory ticket is queued ("queued") or holds a worker ("assigned")."""
        out = []
        for p in self.pairs:
            if p.dead or p.done:
                continue
            fut = p.memory.future
            if state == "queued" and not fut.done():
                out.append(p)
            elif state == "assigned" and fut.done() and not fut.cancelled() and fut.exception() is None:
                out.append(p)
        return out

    # ---- rules

    @rule(g=st.integers(0, GATEWAYS - 1), task=st.sampled_from(TASK_TYPES), h=st.sampled_from(HASHES))
    def enqueue(self, g: int, task: str, h: str | None) -> None:
        m, r = self._both(self.memory.enqueue(task, h), self.redis[g].enqueue(task, h))
        if m is not None:
            self.pairs.append(Pair(g, task, m, r))

    @precondition(lambda self: bool(self.live("queued")))
    @rule(data=st.data(), by=st.integers(0, GATEWAYS - 1))
    def cancel(self, data: st.DataObject, by: int) -> None:
        p = data.draw(st.sampled_from(self.live("queued")))
        m, r = self._both(self.memory.cancel(p.memory.ticket_id), self.redis[by].cancel(p.redis.ticket_id))
        assert m == r

    @precondition(lambda self: bool(self.live("queued") or self.live("assigned")))
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from(self.live("queued") + self.live("assigned")))
        self._both(self.memory.withdraw(p.memory), self.redis[p.gateway].withdraw(p.redis))
        p.done = True

    @precondition(lambda self: bool(self.live("assigned")))
    @rule(data=st.data(), h=st.sampled_from([*HASHES, "keep"]), confirmed=st.booleans())
    def release(self, data: st.DataObject, h: str | None, confirmed: bool) -> None:
        p = data.draw(st.sampled_from(self.live("assigned")))
        cache: dict[str, Any] = {} if h == "keep" else {"cached_hash": h}
        self._both(
            self.memory.release(p.memory.future.result(), confirmed=confirmed, **cache),
            self.redis[p.gateway].release(p.redis.future.result(), confirmed=confirmed, **cache),
        )
        p.done = True

    @precondition(lambda self: bool(self.live("assigned")))
    @rule(data=st.data())
    def worker_lost(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from(self.live("assigned")))
        self._both(
            self.memory.worker_lost(p.memory.future.result()),
            self.redis[p.gateway].worker_lost(p.redis.future.result()),
        )
        p.done = True

    @precondition(lambda self: bool(self.live("assigned")))
    @rule(data=st.data(), paused=st.booleans())
    def pause(self, data: st.DataObject, paused: bool) -> None:
        p = data.draw(st.sampled_from(self.live("assigned")))
        self._both(
            self.memory.set_paused(p.memory.future.result(), paused),
            self.redis[p.gateway].set_paused(p.redis.future.result(), paused),
        )

    @rule(
        w=st.integers(0, len(WORKERS) - 1),
        by=st.integers(0, GATEWAYS - 1),
        state=st.sampled_from(
            [WorkerState.IDLE, WorkerState.IDLE, WorkerState.BUSY_STREAMING, WorkerState.ERROR]
        ),
        h=st.sampled_from(HASHES),
    )
    def health_report(self, w: int, by: int, state: WorkerState, h: str | None) -> None:
        url = self.urls[w]
        caps, engine = WORKERS[w]
        said = health(state, engine=engine, cached_hash=h if state is WorkerState.IDLE else None, **caps)
        self._both(
            self.memory.report_health(self.mem_ids[url], said),
            self.redis[by].report_health(self.red_ids[url], said),
        )

    @rule(w=st.integers(0, len(WORKERS) - 1), by=st.integers(0, GATEWAYS - 1))
    def unreachable(self, w: int, by: int) -> None:
        url = self.urls[w]
        self._both(
            self.memory.report_unreachable(self.mem_ids[url], 1),
            self.redis[by].report_unreachable(self.red_ids[url], 1),
        )

    @rule(slots=st.sampled_from([None, 0, 1, 2]), by=st.integers(0, GATEWAYS - 1))
    def pipeline_slots(self, slots: int | None, by: int) -> None:
        report = PipelineReport(pipeline="p", address="tcp://127.0.0.1:1", epoch="e", session_slots=slots)
        self._both(self.memory.set_pipeline(report), self.redis[by].set_pipeline(report))

    @rule(g=st.integers(0, GATEWAYS - 1))
    def gateway_dies(self, g: int) -> None:
        """Gateway ``g`` is reaped; in memory, what reaping means: its waiters leave the queue, the
        sessions it relayed end unconfirmed (their workers stay busy until they say free)."""
        mine = [p for p in self.pairs if p.gateway == g and not p.dead and not p.done]

        async def in_memory() -> None:
            for p in mine:
                if not p.memory.future.done():
                    await self.memory.cancel(p.memory.ticket_id)
                elif p.memory.future.exception() is None:
                    await self.memory.release(p.memory.future.result(), confirmed=False)

        async def in_redis() -> None:
            dead = self.redis[g]
            await dead.call("leave", dead.gateway_id)
            self.redis[g] = self._gateway(g)
            await self.redis[g].start()
            dead.background = False
            await dead.client.aclose()

        self._both(in_memory(), in_redis())
        for p in mine:
            p.dead = True

    # ---- invariants

    @invariant()
    def same_assignments(self) -> None:
        by_id = {v: k for k, v in self.red_ids.items()}
        mem_by_id = {v: k for k, v in self.mem_ids.items()}
        for p in self.pairs:
            if p.dead:
                continue
            m, r = p.memory.future, p.redis.future
            assert m.done() == r.done(), (p.memory, p.redis)
            if not m.done():
                continue
            if isinstance(m.exception(), TicketCancelled):
                assert isinstance(r.exception(), TicketCancelled)
                continue
            ma, ra = m.result(), r.result()
            assert mem_by_id[ma.worker_id] == by_id[ra.worker_id], (ma, ra)
            assert (ma.cache_hit, ma.epoch, ma.task_type) == (ra.cache_hit, ra.epoch, ra.task_type)

    @invariant()
    def same_queue_and_workers(self) -> None:
        # the memory store extends its snapshot of waits in place as tickets join the tail (an
        # estimate until the next change); the Redis store computes it afresh: compare with afresh
        self.memory.pool._snapshot = None
        mq, rq = self._run(self.memory.queue()), self._run(self.redis[0].queue())
        mem_order = {p.memory.ticket_id: i for i, p in enumerate(self.pairs)}
        red_order = {p.redis.ticket_id: i for i, p in enumerate(self.pairs)}
        assert [(mem_order[t.ticket_id], t.position, t.estimated_wait_s) for t in mq] == [
            (red_order[t.ticket_id], t.position, t.estimated_wait_s) for t in rq
        ]
        mw = {w.url: w for w in self._run(self.memory.workers())}
        rw = {w.url: w for w in self._run(self.redis[0].workers())}
        assert mw.keys() == rw.keys()
        mem_tid = {p.memory.ticket_id: i for i, p in enumerate(self.pairs)}
        red_tid = {p.redis.ticket_id: i for i, p in enumerate(self.pairs)}
        for url in mw:
            a, b = mw[url], rw[url]
            assert (a.state, a.cached_hash, a.epoch, a.task_type, a.sessions_served) == (
                b.state,
                b.cached_hash,
                b.epoch,
                b.task_type,
                b.sessions_served,
            ), url
            assert mem_tid.get(a.ticket_id) == red_tid.get(b.ticket_id), url

    @invariant()
    def fifo_per_task_type_and_one_ticket_per_worker(self) -> None:
        queued = {t.ticket_id for t in self._run(self.redis[0].queue())}
        order = {p.redis.ticket_id: i for i, p in enumerate(self.pairs)}
        for task in set(TASK_TYPES):
            waiting = [order[t] for t in queued if t in order and self.pairs[order[t]].task == task]
            served = [
                i
                for i, p in enumerate(self.pairs)
                if p.task == task
                and p.redis.future.done()
                and not p.redis.future.cancelled()
                and p.redis.future.exception() is None
                and not p.dead
            ]
            # a ticket is never served while an older one of its type waits
            assert not waiting or not served or max(served) < min(waiting), (task, waiting, served)
        holders = [w.ticket_id for w in self._run(self.redis[0].workers()) if w.ticket_id]
        assert len(holders) == len(set(holders))

    # ---- the end

    async def _give_back_everything(self) -> None:
        for p in self.pairs:
            if p.dead or p.done:
                continue
            await self.memory.withdraw(p.memory)
            await self.redis[p.gateway].withdraw(p.redis)
        await self._deliver()

    async def _nothing_at_rest(self) -> None:
        client = self.redis[0].client
        left = [k async for k in client.scan_iter(match=f"{self.key}:t:*")]
        left += [k async for k in client.scan_iter(match=f"{self.key}:q:*")]
        for g in self.redis:
            left += [k async for k in client.scan_iter(match=f"{self.key}:gw:{g.gateway_id}:tickets")]
        assert left == []
        assert await self.redis[0].queue_length() == 0


TestDifferential = Differential.TestCase
TestDifferential.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
