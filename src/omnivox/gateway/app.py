"""The gateway app: admission, queue, routing, the protocol edges, the HTTP API, pages and metrics.

It names no wire protocol: every protocol in ``protocol.registry`` is mounted on the generic edge.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from omnivox.core.config import Settings
from omnivox.gateway.auth import require
from omnivox.gateway.bodies import BodyLimit, body_ceiling
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.mount import mount_protocols
from omnivox.gateway.edges.worker_link import worker_headers
from omnivox.gateway.http import assets, recordings, voices
from omnivox.gateway.http.pages import mount_pages
from omnivox.gateway.http.routes import router
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.recording import recording_service, retention
from omnivox.gateway.scheduling.admission import Admission
from omnivox.gateway.scheduling.eta import DurationModel
from omnivox.gateway.scheduling.health import HealthMonitor
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.telephony.routes import mount_telephony
from omnivox.protocol.control.workers import worker_base_url

Hook = Callable[[], Coroutine[Any, Any, None]]


def create_gateway_app(settings: Settings, background: list[Hook] | None = None) -> FastAPI:
    """Build the gateway. ``background`` coroutines run for the app's life (e.g. local workers)."""
    durations = DurationModel(alpha=settings.eta_ema_alpha, min_samples=settings.eta_min_samples)
    pool = WorkerPool(
        max_queue_size=settings.max_queue_size, durations=durations, max_workers=settings.max_workers
    )
    for url in settings.worker_urls:
        pool.add_worker(worker_base_url(url))
    metrics = GatewayMetrics()
    admission = Admission(pool, metrics, settings.queue_update_interval_s)
    health = HealthMonitor(
        pool,
        interval_s=settings.health_interval_s,
        timeout_s=settings.health_timeout_s,
        offline_after=settings.offline_after_failures,
        forget_after_s=settings.forget_offline_after_s,
        headers=worker_headers(settings),
    )
    recorder = recording_service(settings, metrics)
    ctx = GatewayContext(
        settings=settings,
        pool=pool,
        metrics=metrics,
        admission=admission,
        health=health,
        recordings=recorder,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        jobs = [admission.run(), health.run(), retention(recorder, settings, metrics)]
        tasks = [asyncio.create_task(job) for job in jobs] + [
            asyncio.create_task(h()) for h in background or []
        ]
        sip = getattr(app.state, "sip", None)
        if sip is not None:
            await sip.start()
        try:
            yield
        finally:
            if sip is not None:
                await sip.stop()
            await ctx.calls.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # the sessions have ended: their recordings are finished before the process goes
            await asyncio.to_thread(recorder.close)

    docs_public = settings.public_api_docs if settings.public_api_docs is not None else not settings.any_key
    if docs_public:
        app = FastAPI(title="omnivox gateway", lifespan=lifespan)
    else:  # the API's description is the admin's: no doc pages, the schema with the admin key
        app = FastAPI(
            title="omnivox gateway", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None
        )

        @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(require("admin"))])
        async def openapi() -> dict[str, Any]:
            return app.openapi()

    app.state.ctx = ctx
    app.state.media_tokens = recordings.MediaTokens()
    app.add_middleware(BodyLimit, ceiling=body_ceiling(settings))  # every body, whoever reads it
    if settings.allowed_origins:  # pages of those origins may read the API (same origin needs nothing)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.include_router(router)
    app.include_router(voices.router)
    app.include_router(assets.router)
    app.include_router(recordings.router)
    mount_pages(app)
    mount_protocols(app, ctx)
    mount_telephony(app, ctx)
    return app
