"""The worker process: a FastAPI app hosting one engine (or one per seat: ``worker.seats``), with a
handler per wire protocol it serves."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Sequence

from fastapi import FastAPI, HTTPException, Request

from omnivox.core.config import Settings
from omnivox.core.errors import UnknownSeat
from omnivox.core.keys import key_matches, offered_key
from omnivox.engines.base import Engine
from omnivox.engines.registry import build_seat_engines
from omnivox.protocol.control.workers import SEATS_HEALTH_PATH, SeatsHealth, WorkerHealth
from omnivox.worker.dependencies import DependencyMonitor, dependencies
from omnivox.worker.duplex.session import DuplexSession
from omnivox.worker.host import EngineHost
from omnivox.worker.hosting import HandlerFactory, mount_handlers
from omnivox.worker.realtime.session import RealtimeSession
from omnivox.worker.registration import heartbeat_loop
from omnivox.worker.seats import Seats
from omnivox.worker.streaming import StreamingHandler

# protocol name -> its handler; a protocol without one here is not served by workers
HANDLERS: dict[str, HandlerFactory] = {
    "streaming": StreamingHandler,
    "duplex": DuplexSession,
    "realtime": RealtimeSession,
}


def create_worker_app(
    settings: Settings,
    engine: Engine | None = None,
    public_url: str | None = None,
    engines: Sequence[Engine] | None = None,
) -> FastAPI:
    """Build the worker app: one engine host (``engine``, or the one the settings name) at the root
    of its URL, or with ``settings.seats`` > 1 (or several ``engines``) one per seat, each under its
    own path and registered as a worker of its own (``worker.seats``). Engines load in their
    threads at start-up (LOADING -> IDLE | ERROR)."""
    if engines is None:
        engines = [engine] if engine is not None else build_seat_engines(settings)
    url = public_url or settings.worker_public_url
    seats = Seats([EngineHost(e) for e in engines], url)
    monitor = DependencyMonitor(dependencies(settings), settings.dependency_check_s)

    def report_health(host: EngineHost) -> WorkerHealth:
        report = host.health()
        if monitor.problems:
            report.problems = list(monitor.problems.values())
            if report.status == "ok":
                report.status = "degraded"
        return report

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(monitor.run(), name="dependencies")]
        for i, seat in enumerate(seats.all):
            tasks.append(asyncio.create_task(seat.host.load(), name=f"load-engine-{i}"))
        public = [(seat.url, functools.partial(report_health, seat.host)) for seat in seats.all if seat.url]
        if settings.gateway_url and public:
            heartbeats = heartbeat_loop(
                settings.gateway_url, public, settings.heartbeat_interval_s, settings.key_for("worker")
            )
            tasks.append(asyncio.create_task(heartbeats, name="heartbeat"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(seat.host.close() for seat in seats.all))

    app = FastAPI(title="omnivox worker", lifespan=lifespan)
    app.state.host = seats.all[0].host
    app.state.seats = seats

    def require_key(request: Request) -> None:
        key = settings.key_for("worker")
        if key and not key_matches(offered_key(request.headers), key):
            raise HTTPException(401, detail={"code": "unauthorized", "message": "the worker key is required"})

    if seats.seated:

        @app.get(SEATS_HEALTH_PATH, response_model=SeatsHealth)
        async def seats_health(request: Request) -> SeatsHealth:
            """Every seat's health in one reply (the gateway's health check of the process)."""
            require_key(request)
            return SeatsHealth(seats=[report_health(seat.host) for seat in seats.all])

    @app.get(seats.prefix + "/health", response_model=WorkerHealth)
    async def health(request: Request) -> WorkerHealth:
        require_key(request)
        try:
            host = seats.find(request.path_params.get("seat"))
        except UnknownSeat as err:
            raise HTTPException(err.http_status, detail=err.to_payload()) from None
        return report_health(host)

    mount_handlers(app, HANDLERS, seats, settings)
    return app
