"""Health checks: the gateway's own view of every worker, from polling ``GET /health``.

What a worker says in its registration is not trusted for anything: its state, capabilities and
cache come only from these checks (a new worker is checked at once). The loop survives anything a
check can raise (a bad URL, a hung worker, garbage in the reply): a failure counts against that
worker only, and is logged once per worker until it recovers. A worker offline for longer than
``forget_offline_after_s`` is removed from the store. With several gateways each checks the workers
it holds the monitor lease of (``SchedulerStore.monitored``).

A worker whose session ended without the worker saying it was done (its client left mid-turn) is
``confirm``-ed: checked every ``confirm_interval_s`` until it reports itself free, and only then
given to the next session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any, TypeVar

import httpx

from omnivox.core.errors import OmnivoxError
from omnivox.gateway.scheduling.store import SchedulerStore, WorkerView
from omnivox.protocol.control.workers import SEATS_HEALTH_PATH, SeatsHealth, WorkerHealth, seat_of

log = logging.getLogger(__name__)
T = TypeVar("T")


class HealthMonitor:
    def __init__(
        self,
        store: SchedulerStore,
        *,
        interval_s: float,
        timeout_s: float,
        offline_after: int,
        forget_after_s: float,
        headers: Mapping[str, str] | None = None,
        confirm_interval_s: float = 0.1,
        confirm_for_s: float = 10.0,
    ) -> None:
        self.store = store
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
        self._store_down = False

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers) as client:
            self._client = client
            try:
                while True:
                    try:
                        await self.check_all()
                        await self.forget_offline()
                    except OmnivoxError as err:  # the store is unreachable: try again next round
                        if not self._store_down:
                            log.warning("health checks paused: %s", err.message)
                        self._store_down = True
                    else:
                        self._store_down = False
                    await asyncio.sleep(self.interval_s)
            finally:
                self._client = None
                for task in self._tasks:
                    task.cancel()

    async def check_all(self) -> None:
        """Check every worker this gateway monitors (with several gateways, each checks its share);
        the seats of one worker process with one request (``_check_seats``)."""
        checks: list[Awaitable[Any]] = []
        processes: dict[str, list[tuple[str, str, int]]] = {}
        for worker_id, url in await self.store.monitored():
            seat = seat_of(url)
            if seat is None:
                checks.append(self.check(worker_id, url))
            else:
                processes.setdefault(seat[0], []).append((worker_id, url, seat[1]))
        for base, seated in processes.items():
            if len(seated) == 1:
                checks.append(self.check(*seated[0][:2]))
            else:
                checks.append(self._check_seats(base, seated))
        await asyncio.gather(*checks)

    async def _check_seats(self, base: str, seated: list[tuple[str, str, int]]) -> None:
        """Check the seats (worker id, URL, seat) of the worker process at ``base`` with one
        ``GET /seats/health``: each seat's report counts as its own check. A process that cannot
        be reached fails every seat's check; one that does not answer that path (a worker from
        before it) or answers garbage is checked seat by seat."""
        client = self._client
        if client is None:
            return
        try:
            resp = await client.get(base + SEATS_HEALTH_PATH)
        except Exception as exc:  # unreachable: every seat is (one process)
            await asyncio.gather(*(self._unreachable(worker_id, url, exc) for worker_id, url, _ in seated))
            return
        try:
            resp.raise_for_status()
            reports = SeatsHealth.model_validate(resp.json()).seats
        except Exception:
            await asyncio.gather(*(self.check(worker_id, url) for worker_id, url, _ in seated))
            return
        await asyncio.gather(
            *(
                self._check(worker_id, url, reports[seat])
                if seat < len(reports)
                else self._unreachable(worker_id, url, LookupError(f"the process has no seat {seat}"))
                for worker_id, url, seat in seated
            )
        )

    async def check(self, worker_id: str, url: str) -> WorkerHealth | None:
        """One check of the worker; never raises (but for cancellation)."""
        seen = await self._check(worker_id, url)
        return seen[0] if seen is not None else None

    async def _check(
        self, worker_id: str, url: str, health: WorkerHealth | None = None
    ) -> tuple[WorkerHealth, WorkerView | None] | None:
        """What the worker said (asked here, unless ``health`` came with its process's other seats'),
        and the store's view after it (None: unreachable)."""
        client = self._client
        if client is None:
            return None
        if health is None:
            try:
                resp = await client.get(url.rstrip("/") + "/health")
                resp.raise_for_status()
                health = WorkerHealth.model_validate(resp.json())
            except Exception as exc:  # whatever a check meets is the worker's failure, never the loop's
                await self._unreachable(worker_id, url, exc)
                return None
        self._failing.discard(worker_id)
        view = await _quietly(self.store.report_health(worker_id, health))
        if view is not None and _winding_down(view) and worker_id not in self._confirming:
            self.confirm(worker_id, url)  # busy on its own word only: look again soon, not next round
        return health, view

    async def _unreachable(self, worker_id: str, url: str, exc: Exception) -> None:
        """A failed check: the worker's, logged once until it recovers."""
        if worker_id not in self._failing:
            self._failing.add(worker_id)
            log.warning("health check of worker %s (%s) failed: %r", worker_id, url, exc)
        await _quietly(self.store.report_unreachable(worker_id, self.offline_after))

    def check_soon(self, worker_id: str, url: str) -> None:
        """Check the worker now, not at the next round (a worker that just registered)."""
        self._spawn(self.check(worker_id, url))

    def confirm(self, worker_id: str, url: str) -> None:
        """Poll the worker until it says it is free (the store then dispatches it), or give up."""
        self._spawn(self._confirm(worker_id, url))

    async def _confirm(self, worker_id: str, url: str) -> None:
        if worker_id in self._confirming:
            return
        self._confirming.add(worker_id)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.confirm_for_s
            while loop.time() < deadline:
                await asyncio.sleep(self.confirm_interval_s)
                seen = await self._check(worker_id, url)
                if seen is not None and (seen[1] is None or not _winding_down(seen[1])):
                    return  # free (dispatched already), lost, removed, or serving a new ticket
        finally:
            self._confirming.discard(worker_id)

    async def forget_offline(self) -> None:
        for worker in await self.store.forget_offline(self.forget_after_s):
            log.info("forgetting worker %s (%s): offline for too long", worker.worker_id, worker.url)
            self._failing.discard(worker.worker_id)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _quietly(work: Awaitable[T]) -> T | None:
    """A store call whose failure (the store is unreachable) only skips this step."""
    try:
        return await work
    except OmnivoxError:
        return None


def _winding_down(view: WorkerView) -> bool:
    """Busy on its own word: the session it served has ended, the worker has not said it is free."""
    return view.state.busy and view.ticket_id is None
