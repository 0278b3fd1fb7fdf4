"""Scheduler stores for tests: a clock the test moves, a worker's health reply, and a store of idle
workers for each store the gateway has (memory; Redis on a real ``redis-server``)."""

from __future__ import annotations

from omnivox.gateway.scheduling.store import SchedulerStore, WorkerView
from omnivox.protocol.workers import Capabilities, WorkerHealth, WorkerState


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
