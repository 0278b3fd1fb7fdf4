"""The health monitor: the gateway's own view of each worker, robust to anything a check meets."""

from __future__ import annotations

import asyncio
import logging

import httpx

from omnivox.gateway.scheduling.health import HealthMonitor
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.protocol.control.workers import WorkerState


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def monitor_with(pool: WorkerPool, handler, **kw) -> HealthMonitor:
    m = HealthMonitor(pool, interval_s=1, timeout_s=1, offline_after=1, forget_after_s=10, **kw)
    m._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return m


def healthy(state: str = "IDLE", **caps):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"state": state, "engine": "echo", "capabilities": {"streaming": True, **caps}}
        )

    return handler


async def test_the_gateway_s_own_check_sets_state_and_capabilities():
    pool = WorkerPool()
    w = pool.add_worker("http://w:1")
    await monitor_with(pool, healthy(duplex=True)).check(w)
    assert w.state is WorkerState.IDLE and w.capabilities.duplex and w.engine == "echo"


async def test_any_failure_is_the_worker_s_and_is_logged_once(caplog):
    pool = WorkerPool()
    w = pool.add_worker("http://w:1")

    def explode(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("something nobody expected")

    m = monitor_with(pool, explode)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert await m.check(w) is None
    assert w.state is WorkerState.OFFLINE
    assert sum("health check" in r.message for r in caplog.records) == 1


async def test_garbage_replies_count_as_failures():
    pool = WorkerPool()
    w = pool.add_worker("http://w:1")
    for reply in (httpx.Response(200, text="not json"), httpx.Response(200, json={"state": "DANCING"})):
        m = monitor_with(pool, lambda request, reply=reply: reply)
        assert await m.check(w) is None
    assert w.state is WorkerState.OFFLINE


async def test_workers_offline_too_long_are_forgotten():
    clock = Clock()
    pool = WorkerPool(clock=clock)
    w = pool.add_worker("http://w:1")
    pool.mark_offline(w)
    m = monitor_with(pool, healthy())
    clock.now = 5
    m.forget_offline()
    assert w.worker_id in pool.workers
    clock.now = 11
    m.forget_offline()
    assert pool.workers == {}


async def test_a_busy_report_from_a_loading_worker_keeps_it_loading():
    pool = WorkerPool()
    w = pool.add_worker("http://w:1")
    await monitor_with(pool, healthy("BUSY_STREAMING")).check(w)
    assert w.state is WorkerState.LOADING  # not handed out either way; IDLE once it says so


async def test_a_worker_busy_on_its_own_word_is_watched_until_it_is_free():
    pool = WorkerPool()
    w = pool.add_worker("http://w:1")
    pool.report_health(w, WorkerState.IDLE)
    replies = iter(["BUSY_STREAMING", "BUSY_STREAMING", "IDLE"])

    def handler(request: httpx.Request) -> httpx.Response:
        state = next(replies, "IDLE")
        return httpx.Response(200, json={"state": state, "engine": "echo", "capabilities": {}})

    m = monitor_with(pool, handler, confirm_interval_s=0.01)
    await m.check(w)  # says busy: the monitor keeps looking, soon
    assert w.state is WorkerState.BUSY_STREAMING
    for _ in range(100):
        if w.state is WorkerState.IDLE:
            break
        await asyncio.sleep(0.01)
    assert w.state is WorkerState.IDLE
