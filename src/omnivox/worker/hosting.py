"""Hosting a session on a worker, whatever its protocol: one route per protocol with a handler.

For each connection: accept, check the engine can serve the protocol's task type, take the engine
host (one session at a time) and move to the task's busy state, run the handler on the session
runtime, and, however the session ends, close the handler and release the host (which resets the
engine's per-session state before the next session can start). Errors are reported in the
protocol's words; when the gateway is the peer, each is also counted in an internal metrics frame.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, WebSocket
from fastapi.responses import JSONResponse
from opentelemetry.trace import SpanKind

from omnivox.connection.runtime import Connection
from omnivox.connection.sockets import AsgiSocket
from omnivox.core.config import Settings
from omnivox.core.errors import WS_POLICY, OmnivoxError, UnknownSeat, WorkerBusy, WorkerUnavailable
from omnivox.core.ids import check_session_id
from omnivox.core.keys import key_matches, offered_key
from omnivox.core.logging import SESSION_ID
from omnivox.core.tracing import TRACEPARENT, context_from, tracer
from omnivox.protocol.control.internal import GATEWAY_HEADER, Metrics
from omnivox.protocol.control.workers import TASKS, WorkerState, assignment_epoch
from omnivox.protocol.registry import PROTOCOLS
from omnivox.protocol.spec import WireProtocol
from omnivox.worker.handler import SessionHandler, SessionInfo
from omnivox.worker.host import EngineHost
from omnivox.worker.seats import Seats

log = logging.getLogger(__name__)

HandlerFactory = Callable[[Connection, EngineHost, Settings, SessionInfo], SessionHandler]


async def host_session(
    ws: WebSocket, protocol: WireProtocol, make: HandlerFactory, host: EngineHost, settings: Settings
) -> None:
    query = dict(ws.query_params)
    epoch = assignment_epoch(query)
    # a gateway's session this worker cannot take at once is refused before the socket opens
    fenced = ws.headers.get(GATEWAY_HEADER) == "1" and _can_deny(ws)
    if fenced:
        try:
            host.fence(epoch)
            if host.state in (WorkerState.LOADING, WorkerState.ERROR):
                raise WorkerBusy(f"worker is {host.state.value}", state=host.state.value)
        except WorkerBusy as err:
            host.refused(epoch)
            log.info("session refused (%s): epoch=%s ticket=%s", err.code, epoch, query.get("ticket"))
            await ws.send_denial_response(JSONResponse(err.to_payload(), status_code=err.http_status))
            return
    await ws.accept(subprotocol=protocol.subprotocol(list(ws.scope.get("subprotocols", []))))
    socket = AsgiSocket(ws)
    info = SessionInfo(
        session_id=ws.path_params.get("session_id") or "",
        query=query,
        behind_gateway=ws.headers.get(GATEWAY_HEADER) == "1",
        worker_id=query.get("worker_id"),
    )

    def count(code: str) -> None:
        if info.behind_gateway:
            conn.send(Metrics(error_code=code).model_dump_json())

    conn = Connection(
        socket,
        protocol,
        on_error=count,
        outbox_limit_bytes=settings.max_outbox_bytes,
        slow_peer_s=settings.slow_client_timeout_s,
    )
    task_type = protocol.task_type(info.session_id, query)
    try:
        if info.session_id:
            check_session_id(info.session_id)
        loaded = host.state not in (WorkerState.LOADING, WorkerState.ERROR)
        if loaded and not host.capabilities.serves(task_type):
            raise WorkerUnavailable(f"engine {host.engine.name} cannot serve {task_type} sessions")
        if not fenced:
            host.fence(epoch)  # before waiting: a stale gateway is refused at once
        await host.acquire()
    except OmnivoxError as err:
        host.refused(epoch)
        log.info("session refused (%s): epoch=%s ticket=%s", err.code, epoch, query.get("ticket"))
        with contextlib.suppress(Exception):
            await socket.send(protocol.error_frame(err))
        await socket.close(err.close_code)
        return
    # one line at each end, with the system-wide monotonic clock: the fault tests check from these
    # that no two sessions overlap on a worker
    # (a seat's epochs are its own: with several seats, the line says which)
    seat = f" seat={ws.path_params['seat']}" if "seat" in ws.path_params else ""
    log.info("session start: epoch=%s ticket=%s t=%.6f%s", epoch, query.get("ticket"), time.monotonic(), seat)
    handler: SessionHandler | None = None
    SESSION_ID.set(info.session_id or None)  # this connection's task logs with its session
    span = tracer().start_as_current_span(
        "worker.session",
        context=context_from(ws.headers.get(TRACEPARENT)),  # the gateway's session span
        kind=SpanKind.SERVER,
        attributes={
            "omnivox.protocol": protocol.name,
            "omnivox.session_id": info.session_id,
            "omnivox.worker_id": info.worker_id or "",
            "omnivox.engine": host.engine.name,
        },
    )
    try:
        with span:
            host.begin(TASKS[task_type][0])
            handler = make(conn, host, settings, info)
            await conn.run(handler.on_frame, handler.main())
    finally:
        if handler is not None:
            await handler.close()
        log.info(
            "session end: epoch=%s ticket=%s t=%.6f%s", epoch, query.get("ticket"), time.monotonic(), seat
        )
        await host.release()  # the engine is reset before the next session can take the worker


def _can_deny(ws: WebSocket) -> bool:
    """Whether the server can answer a WebSocket handshake with an HTTP response (the ASGI denial
    extension). A gateway's session this worker cannot take at once (a stale assignment: it serves
    a newer one; or it is loading or broken) is refused with 409 and the error as JSON: the gateway
    knows no session started and puts its client back in the queue for the next worker, instead of
    relaying a refusal the client can do nothing about. Without it, the refusal is in-band."""
    return "websocket.http.response" in ws.scope.get("extensions", {})


async def _refuse_unknown_seat(ws: WebSocket, protocol: WireProtocol, err: UnknownSeat) -> None:
    """A session for a seat this process does not have: 404 at the handshake where the server can
    answer one with HTTP, else the protocol's error frame and a close."""
    log.info("session refused (%s): %s", err.code, ws.url.path)
    if _can_deny(ws):
        await ws.send_denial_response(JSONResponse(err.to_payload(), status_code=err.http_status))
        return
    await ws.accept()
    socket = AsgiSocket(ws)
    with contextlib.suppress(Exception):
        await socket.send(protocol.error_frame(err))
    await socket.close(err.close_code)


def mount_handlers(
    app: FastAPI, handlers: dict[str, HandlerFactory], seats: Seats, settings: Settings
) -> None:
    """A route per registered protocol this worker has a handler for (every worker path it has),
    under each seat's path when the process has several (``worker.seats``)."""
    for protocol in PROTOCOLS:
        make = handlers.get(protocol.name)
        if make is None:
            continue

        def endpoint(
            protocol: WireProtocol = protocol, make: HandlerFactory = make
        ) -> Callable[[WebSocket], Awaitable[None]]:
            async def serve(ws: WebSocket) -> None:
                key = settings.key_for("worker")
                if key and not key_matches(offered_key(ws.headers), key):
                    # only the gateway (which holds the worker key) opens sessions here
                    await ws.close(WS_POLICY)
                    return
                try:
                    host = seats.find(ws.path_params.get("seat"))
                except UnknownSeat as err:
                    await _refuse_unknown_seat(ws, protocol, err)
                    return
                await host_session(ws, protocol, make, host, settings)

            return serve

        for path in protocol.worker_paths:
            app.add_api_websocket_route(seats.prefix + path, endpoint())
