"""The gateway app: admission, queue, routing, protocol edges, metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI, WebSocket

from omnivox.core.config import Settings
from omnivox.gateway import assets, voices
from omnivox.gateway.admission import Admission
from omnivox.gateway.connection import ClientConnection
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.eta import DurationModel
from omnivox.gateway.health import health_loop
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.pages import mount_pages
from omnivox.gateway.pool import WorkerPool
from omnivox.gateway.realtime import serve_realtime
from omnivox.gateway.routes import router
from omnivox.gateway.streaming import StreamingSession
from omnivox.protocol import streaming as sp

Hook = Callable[[], Awaitable[None]]


def create_gateway_app(settings: Settings, background: list[Hook] | None = None) -> FastAPI:
    """Build the gateway. ``background`` coroutines run for the app's life (e.g. local workers)."""
    durations = DurationModel(alpha=settings.eta_ema_alpha, min_samples=settings.eta_min_samples)
    pool = WorkerPool(max_queue_size=settings.max_queue_size, durations=durations)
    for url in settings.worker_urls:
        pool.add_worker(url)
    metrics = GatewayMetrics()
    admission = Admission(pool, metrics, settings.queue_update_interval_s)
    ctx = GatewayContext(settings=settings, pool=pool, metrics=metrics, admission=admission)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        jobs = [
            admission.run(),
            health_loop(
                pool, settings.health_interval_s, settings.health_timeout_s, settings.offline_after_failures
            ),
        ]
        tasks = [asyncio.create_task(job) for job in jobs] + [
            asyncio.create_task(h()) for h in background or []
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    app = FastAPI(title="omnivox gateway", lifespan=lifespan)
    app.state.ctx = ctx
    app.include_router(router)
    app.include_router(voices.router)
    app.include_router(assets.router)
    mount_pages(app)

    @app.websocket("/ws/streaming/{session_id}")
    async def streaming(ws: WebSocket, session_id: str) -> None:
        await ws.accept()
        ctx.metrics.sessions.labels("streaming").inc()
        active = ctx.metrics.active_sessions.labels("streaming")
        active.inc()
        try:
            with ctx.sessions.track("streaming", session_id) as record:
                async with ClientConnection(
                    ws,
                    sp.CLIENT_ADAPTER,
                    sp.CLIENT_TYPES,
                    settings.max_message_bytes,
                    on_error=ctx.metrics.error,
                    is_close=lambda m: isinstance(m, sp.Close),
                ) as conn:
                    await StreamingSession(conn, ctx, session_id, record).run()
        finally:
            active.dec()

    @app.websocket("/v1/realtime")
    async def realtime(ws: WebSocket) -> None:
        await serve_realtime(ws, ctx)

    return app
