"""``WS /ws/realtime`` on a worker: one realtime session holds the worker for its whole life.

The gateway connects here once the pool has assigned this worker (clients may also connect directly
to a worker, e.g. in a single-machine deployment without a gateway). ``?beta=1`` selects the beta
event names for clients that asked for them.
"""

from __future__ import annotations

import contextlib

from fastapi import WebSocket

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError, WorkerUnavailable
from omnivox.protocol import realtime as rt
from omnivox.protocol.workers import WorkerState
from omnivox.worker.host import EngineHost
from omnivox.worker.realtime.session import RealtimeSession


async def serve_realtime(ws: WebSocket, host: EngineHost, settings: Settings) -> None:
    await ws.accept(subprotocol="realtime" if "realtime" in ws.scope.get("subprotocols", []) else None)
    try:
        stack = host.engine.voice
        if stack is None:
            raise WorkerUnavailable(f"engine {host.engine.name} has no voice models for realtime sessions")
        await host.acquire()
    except OmnivoxError as err:
        with contextlib.suppress(Exception):
            await ws.send_text(rt.error_event(err).model_dump_json())
            await ws.close(err.close_code)
        return
    try:
        host.transition(WorkerState.DUPLEX_ACTIVE)
        beta = ws.query_params.get("beta") in ("1", "true")
        await RealtimeSession(ws, stack, settings, beta=beta).run()
    finally:
        await host.release()  # the models are reset before the next session can take the worker
