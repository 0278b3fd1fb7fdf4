"""The gateway app: admission, queue, routing, the protocol edges, the HTTP API, pages and metrics.

It names no wire protocol: every protocol in ``protocol.registry`` is mounted on the generic edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.gateway.auth import require
from omnivox.gateway.bodies import BodyLimit, body_ceiling
from omnivox.gateway.cluster.connection import parse_store_url
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
from omnivox.gateway.scheduling.memory_store import MemoryStore
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.store import SchedulerStore
from omnivox.gateway.telephony.routes import mount_telephony
from omnivox.protocol.control.workers import worker_base_url

Hook = Callable[[], Coroutine[Any, Any, None]]


def create_gateway_app(settings: Settings, background: list[Hook] | None = None) -> FastAPI:
    """Build the gateway. ``background`` coroutines run for the app's life (e.g. local workers)."""
    store = build_store(settings)
    metrics = GatewayMetrics()
    admission = Admission(
        store, metrics, settings.queue_update_interval_s, resume_grace_s=settings.resume_grace_s
    )
    secret = _configured_secret(settings)
    if secret is not None:
        admission.tokens.use_secret(secret)
    health = HealthMonitor(
        store,
        interval_s=settings.health_interval_s,
        timeout_s=settings.health_timeout_s,
        offline_after=settings.offline_after_failures,
        forget_after_s=settings.forget_offline_after_s,
        headers=worker_headers(settings),
    )
    recorder = recording_service(settings, metrics)
    ctx = GatewayContext(
        settings=settings,
        store=store,
        metrics=metrics,
        admission=admission,
        health=health,
        recordings=recorder,
    )

    media_tokens = recordings.MediaTokens(secret=secret)
    if store.kind == "redis":
        from omnivox.gateway.cluster.services import share

        share(ctx, store)  # type: ignore[arg-type]

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await store.start()
        if store.kind == "redis" and not settings.media_secret:
            from omnivox.gateway.cluster.services import media_secret

            with contextlib.suppress(OmnivoxError):  # unreachable: links open on this gateway only
                shared = await media_secret(store)  # type: ignore[arg-type]
                media_tokens.use_secret(shared)
                admission.tokens.use_secret(shared)
        for url in settings.worker_urls:
            await store.register(worker_base_url(url))
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
            await store.close()
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
    app.state.media_tokens = media_tokens
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


def build_store(settings: Settings) -> SchedulerStore:
    """The scheduler store the settings name: this process's memory (the default), or a Redis
    server that several gateways share (``omnivox[redis]``)."""
    durations = DurationModel(alpha=settings.eta_ema_alpha, min_samples=settings.eta_min_samples)
    url = parse_store_url(settings.store_url)
    if url.is_memory:
        pool = WorkerPool(
            max_queue_size=settings.max_queue_size, durations=durations, max_workers=settings.max_workers
        )
        return MemoryStore(pool)
    from omnivox.gateway.cluster.connection import connect
    from omnivox.gateway.cluster.scheduler import RedisStore

    return RedisStore(
        connect(url),
        prefix=settings.store_prefix,
        url=url,
        max_queue_size=settings.max_queue_size,
        max_workers=settings.max_workers,
        durations=durations,
        lease_s=settings.gateway_lease_s,
        resume_grace_s=settings.resume_grace_s,
        info={"url": advertised_url(settings), "started_at": time.time()},
    )


def _configured_secret(settings: Settings) -> bytes | None:
    return hashlib.sha256(settings.media_secret.encode()).digest() if settings.media_secret else None


def advertised_url(settings: Settings) -> str:
    """How other gateways reach this one (the configured one, else its host and port)."""
    if settings.advertise_url:
        return settings.advertise_url.rstrip("/")
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else socket.gethostname()
    return f"http://{host}:{settings.port}"
