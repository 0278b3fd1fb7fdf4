"""The worker process: a FastAPI app hosting one engine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI, WebSocket

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.engines.base import Engine
from omnivox.engines.registry import build_engine
from omnivox.protocol.workers import WorkerHealth
from omnivox.worker.host import EngineHost
from omnivox.worker.realtime.endpoint import serve_realtime
from omnivox.worker.registration import heartbeat_loop
from omnivox.worker.streaming import StreamingConnection


def create_worker_app(
    settings: Settings, engine: Engine | None = None, public_url: str | None = None
) -> FastAPI:
    """Build the worker app. The engine loads in a thread at start-up (LOADING -> IDLE | ERROR)."""
    host = EngineHost(engine or build_engine(settings))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(host.load(), name="load-engine")]
        url = public_url or settings.worker_public_url
        if settings.gateway_url and url:
            tasks.append(
                asyncio.create_task(
                    heartbeat_loop(settings.gateway_url, url, host.health, settings.heartbeat_interval_s),
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
    async def health() -> WorkerHealth:
        return host.health()

    async def streaming(ws: WebSocket) -> None:
        await ws.accept()
        conn = StreamingConnection(ws, host, settings.max_message_bytes, settings.max_new_tokens_limit)
        try:
            await conn.run()
        except OmnivoxError as err:  # e.g. the host is busy or not loaded
            with contextlib.suppress(Exception):
                await ws.send_json(err.to_payload())
                await ws.close(err.close_code)

    app.add_api_websocket_route("/ws/streaming", streaming)
    app.add_api_websocket_route("/ws/streaming/{session_id}", streaming)

    async def realtime(ws: WebSocket) -> None:
        await serve_realtime(ws, host, settings)

    app.add_api_websocket_route("/ws/realtime", realtime)
    return app
