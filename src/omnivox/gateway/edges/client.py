"""The one client edge every wire protocol is served by (the gateway names no protocol).

For each connection: accept (with the protocol's subprotocol), check the client key where the
protocol requires one, enter the session registry and the session metrics, then run the protocol's
scope over the connection runtime:

- ``session`` scope (realtime, duplex): wait for a worker once, then relay frames both ways,
  unparsed, until either side ends. Frames sent while waiting are held (up to the protocol's bound)
  and delivered in order.
- ``turn`` scope (streaming): parse the client's messages; each turn waits for a worker routed by
  the history it continues, then relays until the worker reports the turn over.

Either way a worker that vanishes is marked OFFLINE and the client hears ``worker_lost``: a
session-scoped session ends with it (its state lived there), a turn-scoped one goes on.

A session may also come over WebRTC (``edges.calls``: the call is a ``Socket`` like any other and
runs through ``serve_session``), and a WebSocket may attach to such a call as its sideband (relayed
to the gateway holding the call when that is another one on the same store).
A client key is the long-lived one or an ephemeral key (``edges.client_keys``), spent on one session.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from fastapi import WebSocket
from opentelemetry.trace import SpanKind

from omnivox.connection.relay import Inbound
from omnivox.connection.runtime import Connection
from omnivox.connection.sockets import AsgiSocket, Socket
from omnivox.connection.taps import Taps
from omnivox.core.errors import (
    WS_POLICY,
    GatewayDraining,
    OmnivoxError,
    Unauthorized,
)
from omnivox.core.ids import check_session_id, new_id
from omnivox.core.logging import SESSION_ID
from omnivox.core.tracing import TRACEPARENT, context_from, tracer
from omnivox.gateway.auth import allowed, offered_key, origin_allowed
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.client_keys import Grant, digest, is_ephemeral
from omnivox.gateway.edges.elsewhere import proxy_sideband
from omnivox.gateway.edges.scopes import ClientRequest, SessionEdge, TurnEdge
from omnivox.gateway.edges.taps import MetricsTap
from omnivox.protocol.spec import WireProtocol
from omnivox.recording.service import SessionRecorder
from omnivox.recording.session import RecordedSession

log = logging.getLogger(__name__)


async def serve_client(ws: WebSocket, protocol: WireProtocol, ctx: GatewayContext) -> None:
    """Serve one client connection of ``protocol`` until it ends."""
    settings = ctx.settings
    if not origin_allowed(settings, ws.headers):
        ctx.metrics.error("origin_not_allowed")
        await ws.close(WS_POLICY)  # before the handshake: the page gets a 403, never a socket
        return
    offered = list(ws.scope.get("subprotocols", []))
    await ws.accept(subprotocol=protocol.subprotocol(offered))
    socket = AsgiSocket(ws)
    query = dict(ws.query_params)
    async with contextlib.AsyncExitStack() as held:
        owner: str | None = None
        try:
            if ctx.draining:
                raise GatewayDraining("this gateway is stopping; connect again (to another one)")
            key = offered_key(ws.headers, offered)
            call_id = protocol.call_id(query)
            if call_id is None:
                grant = await authorize(ctx, key)
            else:  # a sideband: a say in someone's call, not a session of its own
                grant = None
                authorize_control(ctx, key, call_id)
            named = protocol.session_id(ws.path_params, query)
            session_id = check_session_id(named) if named is not None else new_id(protocol.name[:2])
            await held.enter_async_context(ctx.limits.hold(ws.client.host if ws.client else "unknown"))
            if not ctx.calls.held(call_id):
                owner = await ctx.peers.call_owner(call_id)  # type: ignore[arg-type]
            call = None if owner is not None else ctx.calls.find(call_id)
        except OmnivoxError as err:
            ctx.metrics.error(protocol.error_code(err))
            await refuse(socket, protocol, err)
            return
        if owner is not None:  # another gateway holds the call: its sideband is relayed there
            await proxy_sideband(socket, owner, ws.url.path, ws.url.query, settings, key)
            return
        if call is not None:
            await call.attach(socket, protocol.withheld(query))  # a sideband: the call's events, a say
            return
        preamble = protocol.defaults_frames(grant.session) if grant and grant.session else []
        host = ws.client.host if ws.client else None
        await serve_session(socket, protocol, ctx, session_id, query, ws.headers, preamble, host)


async def authorize(ctx: GatewayContext, key: str | None) -> Grant | None:
    """Check a session's client key: an ephemeral one is spent (its grant returned), a long-lived
    one compared. Raises ``Unauthorized`` (or ``StoreUnavailable``: keys on an unreachable store)."""
    if is_ephemeral(key):
        assert key is not None
        return await ctx.client_keys.take(key)
    if not allowed(ctx.settings, "client", key):
        raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")
    return None


def authorize_control(ctx: GatewayContext, key: str | None, call_id: str) -> None:
    """Check a call's control (a sideband, a hang-up): the client or admin key, or the ephemeral key
    that opened this very call, never any other ephemeral key. Raises ``Unauthorized``. (A call
    another gateway holds is checked there, where it is relayed.)"""
    settings = ctx.settings
    if is_ephemeral(key):
        assert key is not None
        if ctx.calls.held(call_id) and not ctx.calls.opened_with(call_id, digest(key)):
            raise Unauthorized("an ephemeral key controls only the call it opened")
    elif not (allowed(settings, "client", key) or allowed(settings, "admin", key)):
        raise Unauthorized("a call's sideband or hang-up needs the key that opened it or the client key")


async def serve_session(
    socket: Socket,
    protocol: WireProtocol,
    ctx: GatewayContext,
    session_id: str,
    query: dict[str, str],
    headers: Mapping[str, str],
    preamble: list[str] | None = None,
    client_host: str | None = None,
    ready: Callable[[], Awaitable[bool]] | None = None,
    bridge: bool = False,
) -> None:
    """Serve one admitted connection (a WebSocket, or a WebRTC or phone call) until it ends.
    ``preamble``: client frames the worker gets before any the client sends (session defaults);
    ``client_host``: the peer's address (recorded when ``record_client_address`` is on); ``ready``:
    when it may take a worker (a call: once its media connects); ``bridge``: ``socket`` is a call's
    bridge, which acts on every frame the worker sends (omnivox's own events pause and resume its
    playout) and withholds from its caller and sidebands what they did not ask for."""
    metrics = ctx.metrics
    metrics.sessions.labels(protocol.name).inc()
    active = metrics.active_sessions.labels(protocol.name)
    active.inc()
    recorder = _recorder(ctx, protocol, session_id, query, client_host)
    SESSION_ID.set(session_id)  # this connection's task and the tasks it starts log with it
    span = tracer().start_as_current_span(
        "session",
        context=context_from(headers.get(TRACEPARENT)),  # a client's own trace, when it sends one
        kind=SpanKind.SERVER,
        attributes={"omnivox.protocol": protocol.name, "omnivox.session_id": session_id},
    )
    try:
        with span, ctx.sessions.track(protocol.name, session_id) as record:
            conn = Connection(
                socket,
                protocol,
                on_error=_on_error(metrics.error, recorder),
                outbox_limit_bytes=ctx.settings.max_outbox_bytes,
                slow_peer_s=ctx.settings.slow_client_timeout_s,
            )
            taps = Taps([MetricsTap(metrics, record), *([recorder] if recorder is not None else [])])
            edge_cls = SessionEdge if protocol.scope == "session" else TurnEdge
            request = ClientRequest(session_id, query, protocol.worker_params(headers, query), ready, bridge)
            edge = edge_cls(conn, protocol, ctx, record, request, taps, recorder=recorder)
            for frame in preamble or []:
                item = Inbound(frame)
                edge.inbox.offer(item, item.size, budget=None)
            taps.start()
            try:
                await conn.run(edge.on_frame, edge.main())
            finally:
                try:
                    await taps.close()
                finally:  # however it ended (a lost worker, a shutdown): finished off the loop
                    if recorder is not None:
                        recorder.finish(conn.close_code, client_left=conn.gone.is_set())
    finally:
        active.dec()


def _recorder(
    ctx: GatewayContext,
    protocol: WireProtocol,
    session_id: str,
    query: dict[str, str],
    client_host: str | None,
) -> SessionRecorder | None:
    """The session's recording tap (None: nothing of it is recorded)."""
    if ctx.recordings is None or not ctx.recordings.records_anything:
        return None
    address = client_host if ctx.settings.record_client_address else None
    info = RecordedSession(
        session_id=session_id,
        kind=protocol.name,
        task_type=protocol.task_type(session_id, query),
        started_at=time.time(),
        t0=time.monotonic(),
        client_address=address,
    )
    return ctx.recordings.recorder(info, protocol.timeline_reader())


def _on_error(count: Callable[[str], None], recorder: SessionRecorder | None) -> Callable[[str], None]:
    if recorder is None:
        return count

    def both(code: str) -> None:
        count(code)
        recorder.error(code)

    return both


async def refuse(socket: Socket, protocol: WireProtocol, err: OmnivoxError) -> None:
    """Say why, then close (a connection refused before its session starts)."""
    with contextlib.suppress(Exception):
        await socket.send(protocol.error_frame(err))
    await socket.close(err.close_code)
