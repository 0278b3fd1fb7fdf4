"""Shared fakes for the gateway's unit tests: a clock the test moves, and a pool of idle workers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from omnivox.gateway.scheduling.pool import WorkerPool, WorkerRecord
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.protocol.control.workers import Capabilities


class FakeClock:
    """A monotonic clock that only moves when the test says so."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


MakePool = Callable[..., tuple[WorkerPool, list[WorkerRecord]]]


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
