"""The worker process: a FastAPI app hosting one engine, with a handler per wire protocol it serves."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI, HTTPException, Request

from omnivox.core.config import Settings
from omnivox.core.keys import key_matches, offered_key
from omnivox.engines.base import Engine
from omnivox.engines.registry import build_engine
from omnivox.protocol.control.workers import WorkerHealth
from omnivox.worker.dependencies import DependencyMonitor, dependencies
from omnivox.worker.duplex.session import DuplexSession
from omnivox.worker.host import EngineHost
from omnivox.worker.hosting import HandlerFactory, mount_handlers
from omnivox.worker.realtime.session import RealtimeSession
from omnivox.worker.registration import heartbeat_loop
from omnivox.worker.streaming import StreamingHandler

# protocol name -> its handler; a protocol without one here is not served by workers
HANDLERS: dict[str, HandlerFactory] = {
    "streaming": StreamingHandler,
    "duplex": DuplexSession,
    "realtime": RealtimeSession,
}


def create_worker_app(
    settings: Settings, engine: Engine | None = None, public_url: str | None = None
) -> FastAPI:
    """Build the worker app. The engine loads in a thread at start-up (LOADING -> IDLE | ERROR)."""
    host = EngineHost(engine or build_engine(settings))
    monitor = DependencyMonitor(dependencies(settings), settings.dependency_check_s)

    def report_health() -> WorkerHealth:
        report = host.health()
        if monitor.problems:
            report.problems = list(monitor.problems.values())
            if report.status == "ok":
                report.status = "degraded"
        return report

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(host.load(), name="load-engine"),
            asyncio.create_task(monitor.run(), name="dependencies"),
        ]
        url = public_url or settings.worker_public_url
        if settings.gateway_url and url:
            tasks.append(
                asyncio.create_task(
                    heartbeat_loop(
                        settings.gateway_url,
                        url,
                        report_health,
                        settings.heartbeat_interval_s,
                        settings.key_for("worker"),
                    ),
                    name="heartbeat",
                )
            )
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            host.close()

    app = FastAPI(title="omnivox worker", lifespan=lifespan)
    app.state.host = host

    @app.get("/health", response_model=WorkerHealth)
    async def health(request: Request) -> WorkerHealth:
        key = settings.key_for("worker")
        if key and not key_matches(offered_key(request.headers), key):
            raise HTTPException(401, detail={"code": "unauthorized", "message": "the worker key is required"})
        return report_health()

    mount_handlers(app, HANDLERS, host, settings)
    return app
