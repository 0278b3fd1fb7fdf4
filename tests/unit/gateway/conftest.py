"""Shared fakes for the gateway's unit tests: a clock the test moves, a pool of idle workers, and a
scheduler store of idle workers (each store the gateway has: the same tests, the same outcomes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from omnivox.gateway.scheduling.pool import WorkerPool, WorkerRecord
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.gateway.scheduling.store import SchedulerStore
from omnivox.protocol.control.workers import Capabilities
from stores import FakeClock, health, memory_store, prefix, redis_store

MakePool = Callable[..., tuple[WorkerPool, list[WorkerRecord]]]
MakeStore = Callable[..., Awaitable[tuple[SchedulerStore, list[str]]]]
STORES = ["memory", "redis"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_pool(clock: FakeClock) -> MakePool:
    """``make_pool(n, duplex=, realtime=, max_queue=)``: a pool on ``clock`` with ``n`` IDLE workers
    (URLs ``http://w0`` ...), each reported healthy the way the health loop would."""

    def make(
        n: int, *, duplex: bool = False, realtime: bool = False, max_queue: int = 10
    ) -> tuple[WorkerPool, list[WorkerRecord]]:
        pool = WorkerPool(max_queue_size=max_queue, clock=clock)
        workers = []
        for i in range(n):
            w = pool.add_worker(f"http://w{i}")
            w.capabilities = Capabilities(streaming=True, duplex=duplex, realtime=realtime)
            pool.report_health(w, WorkerState.IDLE)
            workers.append(w)
        return pool, workers

    return make


@pytest.fixture(params=STORES)
async def make_store(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[MakeStore]:
    """``await make_store(n, duplex=, realtime=, engine=, max_queue=, max_workers=, min_samples=)``:
    a scheduler store on ``clock`` with ``n`` IDLE workers (URLs ``http://w0`` ...), reported healthy
    the way the health loop would. Parametrized over every store (Redis: a real redis-server)."""
    made: list[SchedulerStore] = []
    key_prefix = prefix()

    async def make(
        n: int,
        *,
        duplex: bool = False,
        realtime: bool = False,
        engine: str = "echo",
        max_queue: int = 10,
        max_workers: int = 64,
        min_samples: int = 3,
    ) -> tuple[SchedulerStore, list[str]]:
        limits = {"max_queue": max_queue, "max_workers": max_workers, "min_samples": min_samples}
        if request.param == "memory":
            store: SchedulerStore = memory_store(clock, **limits)
        else:
            server = request.getfixturevalue("redis_db")
            store = redis_store(server.unix_url, f"{key_prefix}{len(made)}", clock, **limits)
        await store.start()
        made.append(store)
        ids = []
        for i in range(n):
            worker_id, _ = await store.register(f"http://w{i}")
            await store.report_health(worker_id, health(engine=engine, duplex=duplex, realtime=realtime))
            ids.append(worker_id)
        return store, ids

    yield make
    for store in made:
        await store.close()
