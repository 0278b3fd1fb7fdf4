"""The health monitor: the gateway's own view of each worker, robust to anything a check meets."""

from __future__ import annotations

import asyncio
import logging

import httpx

from omnivox.gateway.scheduling.health import HealthMonitor
from omnivox.gateway.scheduling.memory_store import MemoryStore
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.store import SchedulerStore
from omnivox.protocol.control.workers import WorkerState
from stores import FakeClock, view


def monitor_with(store: SchedulerStore, handler, **kw) -> HealthMonitor:
    m = HealthMonitor(store, interval_s=1, timeout_s=1, offline_after=1, forget_after_s=10, **kw)
    m._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return m


def healthy(state: str = "IDLE", **caps):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"state": state, "engine": "echo", "capabilities": {"streaming": True, **caps}}
        )

    return handler


async def one_worker(clock: FakeClock | None = None) -> tuple[MemoryStore, str]:
    store = MemoryStore(WorkerPool(clock=clock) if clock else WorkerPool())
    worker_id, _ = await store.register("http://w:1")
    return store, worker_id


async def test_the_gateway_s_own_check_sets_state_and_capabilities():
    store, w = await one_worker()
    await monitor_with(store, healthy(duplex=True)).check(w, "http://w:1")
    shown = await view(store, w)
    assert shown.state is WorkerState.IDLE and shown.capabilities.duplex and shown.engine == "echo"


async def test_any_failure_is_the_worker_s_and_is_logged_once(caplog):
    store, w = await one_worker()

    def explode(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("something nobody expected")

    m = monitor_with(store, explode)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert await m.check(w, "http://w:1") is None
    assert (await view(store, w)).state is WorkerState.OFFLINE
    assert sum("health check" in r.message for r in caplog.records) == 1


async def test_garbage_replies_count_as_failures():
    store, w = await one_worker()
    for reply in (httpx.Response(200, text="not json"), httpx.Response(200, json={"state": "DANCING"})):
        m = monitor_with(store, lambda request, reply=reply: reply)
        assert await m.check(w, "http://w:1") is None
    assert (await view(store, w)).state is WorkerState.OFFLINE


async def test_workers_offline_too_long_are_forgotten():
    clock = FakeClock(0.0)
    store, w = await one_worker(clock)
    await store.report_unreachable(w, offline_after=1)
    m = monitor_with(store, healthy())
    clock.now = 5
    await m.forget_offline()
    assert [x.worker_id for x in await store.workers()] == [w]
    clock.now = 11
    await m.forget_offline()
    assert await store.workers() == []


async def test_check_all_checks_every_monitored_worker():
    store, w = await one_worker()
    other, _ = await store.register("http://w:2")
    await monitor_with(store, healthy()).check_all()
    assert {x.worker_id: x.state for x in await store.workers()} == {
        w: WorkerState.IDLE,
        other: WorkerState.IDLE,
    }


async def test_a_worker_busy_on_its_own_word_is_watched_until_it_is_free():
    store, w = await one_worker()
    await monitor_with(store, healthy()).check(w, "http://w:1")
    replies = iter(["BUSY_STREAMING", "BUSY_STREAMING", "IDLE"])

    def handler(request: httpx.Request) -> httpx.Response:
        state = next(replies, "IDLE")
        return httpx.Response(200, json={"state": state, "engine": "echo", "capabilities": {}})

    m = monitor_with(store, handler, confirm_interval_s=0.01)
    await m.check(w, "http://w:1")  # says busy: the monitor keeps looking, soon
    assert (await view(store, w)).state is WorkerState.BUSY_STREAMING
    for _ in range(100):
        if (await view(store, w)).state is WorkerState.IDLE:
            break
        await asyncio.sleep(0.01)
    assert (await view(store, w)).state is WorkerState.IDLE


async def test_the_seats_of_one_process_are_checked_with_one_request_each_by_its_own_report():
    store = MemoryStore(WorkerPool())
    seats = [(await store.register(f"http://w:7/seats/{i}"))[0] for i in range(3)]
    alone, _ = await store.register("http://w:8")
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        one = {"engine": "echo", "capabilities": {}}
        if request.url.path == "/seats/health":
            states = ["IDLE", "ERROR", "LOADING"]
            return httpx.Response(200, json={"seats": [{"state": s, **one} for s in states]})
        return httpx.Response(200, json={"state": "IDLE", **one})

    await monitor_with(store, handler).check_all()
    assert sorted(asked) == ["http://w:7/seats/health", "http://w:8/health"]
    states = {x.worker_id: x.state for x in await store.workers()}
    assert [states[w] for w in seats] == [WorkerState.IDLE, WorkerState.ERROR, WorkerState.LOADING]
    assert states[alone] is WorkerState.IDLE


async def test_a_process_without_the_seats_report_is_checked_seat_by_seat_and_a_missing_seat_fails():
    store = MemoryStore(WorkerPool())
    seats = [(await store.register(f"http://w:7/seats/{i}"))[0] for i in range(2)]
    old = [(await store.register(f"http://old:7/seats/{i}"))[0] for i in range(2)]
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        one = {"state": "IDLE", "engine": "echo", "capabilities": {}}
        if request.url.host == "old":  # a worker from before the seats' report
            return (
                httpx.Response(404) if request.url.path == "/seats/health" else httpx.Response(200, json=one)
            )
        return httpx.Response(200, json={"seats": [one]})  # it has one seat only

    await monitor_with(store, handler).check_all()
    assert sorted(asked) == [
        "http://old:7/seats/0/health",
        "http://old:7/seats/1/health",
        "http://old:7/seats/health",
        "http://w:7/seats/health",
    ]
    states = {x.worker_id: x.state for x in await store.workers()}
    assert [states[w] for w in old] == [WorkerState.IDLE, WorkerState.IDLE]
    assert [states[w] for w in seats] == [WorkerState.IDLE, WorkerState.OFFLINE]


async def test_an_unreachable_process_fails_every_seat_s_check_with_one_request(caplog):
    store = MemoryStore(WorkerPool())
    seats = [(await store.register(f"http://w:7/seats/{i}"))[0] for i in range(3)]
    asked: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        raise httpx.ConnectError("connection refused")

    with caplog.at_level(logging.WARNING):
        await monitor_with(store, refuse).check_all()
    assert asked == ["http://w:7/seats/health"]
    assert all(x.state is WorkerState.OFFLINE for x in await store.workers() if x.worker_id in seats)
    assert sum("health check" in r.message for r in caplog.records) == 3  # once for each seat
