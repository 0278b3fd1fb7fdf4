"""Scheduler stores for tests: a clock the test moves, a worker's health reply, and a store of idle
workers for each store the gateway has (memory; Redis on a real ``redis-server``)."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from omnivox.gateway.scheduling.eta import DurationModel
from omnivox.gateway.scheduling.memory_store import MemoryStore
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.store import SchedulerStore, WorkerView
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState


class FakeClock:
    """A monotonic clock that only moves when the test says so."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def health(
    state: WorkerState = WorkerState.IDLE,
    *,
    engine: str = "echo",
    cached_hash: str | None = None,
    error: str | None = None,
    voices: list[str] | None = None,
    epoch: int = 0,
    **caps: bool,
) -> WorkerHealth:
    """A worker's ``/health`` reply (streaming only unless ``caps`` say more)."""
    return WorkerHealth(
        state=state,
        engine=engine,
        capabilities=Capabilities(**{"streaming": True, **caps}),
        cached_hash=cached_hash,
        error=error,
        voices=voices or [],
        epoch=epoch,
    )


async def view(store: SchedulerStore, worker_id: str) -> WorkerView:
    return next(w for w in await store.workers() if w.worker_id == worker_id)


def prefix() -> str:
    """A key prefix of its own (with its hash tag) for one test's stores."""
    return "{ovx-" + secrets.token_hex(6) + "}"


def memory_store(
    clock: Callable[[], float], *, max_queue: int = 10, max_workers: int = 64, min_samples: int = 3
) -> MemoryStore:
    durations = DurationModel(min_samples=min_samples)
    pool = WorkerPool(max_queue_size=max_queue, clock=clock, max_workers=max_workers, durations=durations)
    return MemoryStore(pool)


def redis_store(
    url: str,
    key_prefix: str,
    clock: Callable[[], float] | None,
    *,
    max_queue: int = 10,
    max_workers: int = 64,
    min_samples: int = 3,
    gateway_id: str | None = None,
    lease_s: float = 3.0,
    background: bool = False,
    timeout_s: float = 2.0,
):  # -> RedisStore (imported here: the redis package is an extra)
    from omnivox.gateway.cluster.connection import connect, parse_store_url
    from omnivox.gateway.cluster.scheduler import RedisStore

    parsed = parse_store_url(url)
    return RedisStore(
        connect(parsed, timeout_s=timeout_s),
        prefix=key_prefix,
        url=parsed,
        gateway_id=gateway_id,
        max_queue_size=max_queue,
        max_workers=max_workers,
        durations=DurationModel(min_samples=min_samples),
        clock=clock,
        lease_s=lease_s,
        background=background,
    )
