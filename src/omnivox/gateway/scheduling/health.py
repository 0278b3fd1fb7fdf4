"""Health checks: the gateway's own view of every worker, from polling ``GET /health``.

What a worker says in its registration is not trusted for anything: its state, capabilities and
cache come only from these checks (a new worker is checked at once). The loop survives anything a
check can raise (a bad URL, a hung worker, garbage in the reply): a failure counts against that
worker only, and is logged once per worker until it recovers. A worker offline for longer than
``forget_offline_after_s`` is removed from the pool.

A worker whose session ended without the worker saying it was done (its client left mid-turn) is
``confirm``-ed: checked every ``confirm_interval_s`` until it reports itself free, and only then
given to the next session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import httpx

from omnivox.gateway.scheduling.pool import WorkerPool, WorkerRecord
from omnivox.protocol.control.workers import WorkerHealth, WorkerState

log = logging.getLogger(__name__)


def apply_health(pool: WorkerPool, worker: WorkerRecord, health: WorkerHealth) -> None:
    """Copy what a worker says about itself into the pool (state changes go through the pool)."""
    worker.engine = health.engine
    worker.capabilities = health.capabilities
    worker.voices = health.voices
    worker.problems = health.problems
    serving = worker.state.busy and worker.ticket_id is not None
    if not serving and not health.state.busy:
        # The worker's own hash is the truth about its cache (it may have restarted empty). Not while
        # it serves one of our sessions, nor while it says busy: a busy worker reports no hash.
        worker.kv_length = health.kv_length
        worker.cached_hash = health.cached_hash
    pool.report_health(worker, health.state, health.error)


class HealthMonitor:
    def __init__(
        self,
        pool: WorkerPool,
        *,
        interval_s: float,
        timeout_s: float,
        offline_after: int,
        forget_after_s: float,
        headers: Mapping[str, str] | None = None,
        confirm_interval_s: float = 0.1,
        confirm_for_s: float = 10.0,
    ) -> None:
        self.pool = pool
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.offline_after = offline_after
        self.forget_after_s = forget_after_s
        self.headers = dict(headers or {})
        self.confirm_interval_s = confirm_interval_s
        self.confirm_for_s = confirm_for_s
        self._client: httpx.AsyncClient | None = None
        self._failing: set[str] = set()  # workers whose failure was logged (once until they recover)
        self._tasks: set[asyncio.Task[None]] = set()
        self._confirming: set[str] = set()  # workers being polled until they say they are free

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers) as client:
            self._client = client
            try:
                while True:
                    await self.check_all()
                    self.forget_offline()
                    await asyncio.sleep(self.interval_s)
            finally:
                self._client = None
                for task in self._tasks:
                    task.cancel()

    async def check_all(self) -> None:
        workers = list(self.pool.workers.values())
        await asyncio.gather(*(self.check(w) for w in workers))

    async def check(self, worker: WorkerRecord) -> WorkerHealth | None:
        """One check of ``worker``; never raises (but for cancellation)."""
        client = self._client
        if client is None:
            return None
        try:
            resp = await client.get(worker.url.rstrip("/") + "/health")
            resp.raise_for_status()
            health = WorkerHealth.model_validate(resp.json())
        except Exception as exc:  # whatever a check meets is the worker's failure, never the loop's
            if worker.worker_id not in self._failing:
                self._failing.add(worker.worker_id)
                log.warning("health check of worker %s (%s) failed: %r", worker.worker_id, worker.url, exc)
            self.pool.report_unreachable(worker, self.offline_after)
            return None
        self._failing.discard(worker.worker_id)
        if worker.worker_id in self.pool.workers:  # not removed meanwhile
            apply_health(self.pool, worker, health)
            if worker.state.busy and worker.ticket_id is None and worker.worker_id not in self._confirming:
                self.confirm(worker)  # busy on its own word only: look again soon, not next round
        return health

    def check_soon(self, worker: WorkerRecord) -> None:
        """Check ``worker`` now, not at the next round (a worker that just registered)."""
        self._spawn(self.check(worker))

    def confirm(self, worker: WorkerRecord) -> None:
        """Poll ``worker`` until it says it is free (the pool then dispatches it), or give up."""
        self._spawn(self._confirm(worker))

    async def _confirm(self, worker: WorkerRecord) -> None:
        if worker.worker_id in self._confirming:
            return
        self._confirming.add(worker.worker_id)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.confirm_for_s
            while loop.time() < deadline and worker.worker_id in self.pool.workers:
                await asyncio.sleep(self.confirm_interval_s)
                await self.check(worker)
                if not worker.state.busy or worker.ticket_id is not None:
                    return  # free (dispatched already), lost, or serving a new ticket
        finally:
            self._confirming.discard(worker.worker_id)

    def forget_offline(self) -> None:
        now = self.pool.clock()
        for worker in list(self.pool.workers.values()):
            since = worker.offline_since
            if (
                worker.state is WorkerState.OFFLINE
                and since is not None
                and now - since > self.forget_after_s
            ):
                log.info(
                    "forgetting worker %s (%s): offline for %.0f s", worker.worker_id, worker.url, now - since
                )
                self.pool.remove_worker(worker.worker_id)
                self._failing.discard(worker.worker_id)

    def _spawn(self, work: object) -> None:
        task = asyncio.ensure_future(work)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
