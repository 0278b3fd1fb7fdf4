"""Carrier media streams: ``WS /telephony/{carrier}/stream`` (Twilio, Telnyx, Plivo), and
Twilio's voice webhook ``POST /telephony/twilio/voice`` that connects a call to it.

A stream is a call: after the carrier's ``start`` it becomes a ``PhoneCall`` whose session runs
through the one client edge, with the agent profile of the dialled number. Caller audio and key
presses go to the session; reply audio goes back as the carrier's media messages, each followed by
a marker whose echo says it played (``MarkedPlayout``); a barge-in clears the carrier's buffer.
The carrier's messages never get error replies (it has no use for them): bad ones are counted
and dropped. The socket is closed by us only to hang up (end_call, the idle timeout, the API, the
session's end); otherwise the carrier's ``stop`` ends the call.

Who may open one: a carrier whose secret is configured must sign the handshake (Twilio with
``twilio_auth_token``, Telnyx with ``telnyx_public_key``, Plivo with ``plivo_auth_token``); else
a request with the client key (``Authorization: Bearer``), or anyone who reaches the gateway when
no client key is configured (it then listens on loopback only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request, WebSocket
from fastapi.responses import Response

from omnivox.connection.sockets import AsgiSocket
from omnivox.core.config import Settings
from omnivox.core.errors import WS_POLICY, OmnivoxError
from omnivox.gateway.auth import allowed, offered_key
from omnivox.gateway.bodies import read_body
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.telephony.call import PhoneCall, start_call
from omnivox.gateway.telephony.profiles import opening, profile_for
from omnivox.protocol.spec import WireProtocol
from omnivox.telephony.carriers import CARRIERS, Carrier, plivo, telnyx, twilio
from omnivox.telephony.carriers.base import (
    StreamDtmf,
    StreamMark,
    StreamMedia,
    StreamStart,
    StreamStop,
)
from omnivox.telephony.playout import MarkedPlayout

log = logging.getLogger(__name__)

START_WITHIN_S = 10.0  # a stream that has not said ``start`` by then is closed
MAX_BEFORE_START = 20  # messages before ``start`` (``connected``, stray media)


def public_url(settings: Settings, url: str) -> str:
    """``url`` as the carrier reached it: on ``public_url``'s scheme, host and path prefix when one is
    set. A gateway served under a prefix (``https://host/voice/`` behind a proxy that strips it) sees
    ``/telephony/...``; the carrier asked for (and signed) ``/voice/telephony/...``. A path that has the
    prefix already (a proxy that passes it on) keeps it once."""
    if not settings.public_url:
        return url
    base, own = urlsplit(settings.public_url), urlsplit(url)
    scheme = base.scheme
    if own.scheme in ("ws", "wss"):
        scheme = "wss" if base.scheme == "https" else "ws"
    prefix = base.path.rstrip("/")
    path = own.path
    if prefix and path != prefix and not path.startswith(prefix + "/"):
        path = prefix + path
    query = f"?{own.query}" if own.query else ""
    return f"{scheme}://{base.netloc}{path}{query}"


def carrier_signs(settings: Settings, carrier: Carrier) -> bool:
    """Whether the carrier's requests must be signed (its token or key is configured)."""
    secrets = {
        "twilio": settings.twilio_auth_token,
        "telnyx": settings.telnyx_public_key,
        "plivo": settings.plivo_auth_token,
    }
    return bool(secrets.get(carrier.name))


def stream_allowed(settings: Settings, carrier: Carrier, url: str, headers: Any) -> bool:
    """A stream handshake is the carrier's when it carries the carrier's signature (where its secret
    is configured), else when it has the client key (or no key is configured)."""
    url = public_url(settings, url)
    if carrier.name == "twilio" and settings.twilio_auth_token:
        return twilio.signature_ok(settings.twilio_auth_token, url, {}, headers.get("x-twilio-signature"))
    if carrier.name == "telnyx" and settings.telnyx_public_key:
        return telnyx.signature_ok(settings.telnyx_public_key, headers)
    if carrier.name == "plivo" and settings.plivo_auth_token:
        return plivo.signature_ok(settings.plivo_auth_token, "GET", url, headers)
    return allowed(settings, "client", offered_key(headers))


async def twilio_voice(request: Request, ctx: GatewayContext) -> Response:
    """Twilio's voice webhook: TwiML that connects the call to our stream, with its parameters."""
    settings = ctx.settings
    try:
        await read_body(request, settings.http_body_max_bytes)  # form() parses what this read
    except OmnivoxError as err:
        return Response(err.message, status_code=err.http_status)
    form = await request.form()
    params = {k: v for k, v in form.items() if isinstance(v, str)}
    if settings.twilio_auth_token:
        url = public_url(settings, str(request.url))
        if not twilio.signature_ok(
            settings.twilio_auth_token, url, params, request.headers.get("x-twilio-signature")
        ):
            ctx.metrics.error("invalid_signature")
            return Response("invalid X-Twilio-Signature", status_code=403)
    elif not allowed(settings, "client", offered_key(request.headers)):
        ctx.metrics.error("unauthorized")
        return Response("unauthorized", status_code=403)
    # the stream's route beside this one, as the carrier will reach it
    here = request.url
    local = here.replace(
        scheme="wss" if here.scheme == "https" else "ws",
        path=here.path.removesuffix("/voice") + "/stream",
        query="",
    )
    stream = public_url(settings, str(local))
    keep: dict[str, str] = {k: params[k] for k in ("CallSid", "From", "To", "AccountSid") if k in params}
    return Response(twilio.connect_stream(stream, keep), media_type="application/xml")


async def _await_start(socket: AsgiSocket, carrier: Carrier) -> StreamStart | None:
    deadline = time.monotonic() + START_WITHIN_S
    for _ in range(MAX_BEFORE_START):
        try:
            frame = await asyncio.wait_for(socket.receive(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return None
        if frame is None:
            return None
        try:
            event = carrier.parse(frame)
        except OmnivoxError:
            continue
        if isinstance(event, StreamStart):
            return event
        if isinstance(event, StreamStop):
            return None
    return None


async def serve_stream(ws: WebSocket, carrier: Carrier, protocol: WireProtocol, ctx: GatewayContext) -> None:
    """One carrier media stream, as a call, until it ends."""
    settings = ctx.settings
    assert protocol.phone is not None
    if not stream_allowed(settings, carrier, str(ws.url), ws.headers):
        ctx.metrics.error("invalid_signature" if carrier_signs(settings, carrier) else "unauthorized")
        await ws.close(WS_POLICY)  # before the handshake: the carrier sees 403
        return
    if ctx.calls.count(carrier.name) >= settings.phone_max_streams:
        ctx.metrics.error("too_many_sessions")
        await ws.close(WS_POLICY)
        return
    await ws.accept()
    socket = AsgiSocket(ws)
    start = await _await_start(socket, carrier)
    if start is None:
        await socket.close(1000)
        return
    profile = profile_for(settings, start.callee or start.parameters.get("To"))
    outbox: asyncio.Queue[str | None] = asyncio.Queue()
    stream_id, encoding = start.stream_id, start.encoding

    def to_carrier(action: str, data: bytes | str | None) -> None:
        if action == "media" and isinstance(data, bytes):
            outbox.put_nowait(carrier.media(stream_id, data, encoding))
        elif action == "mark" and isinstance(data, str):
            outbox.put_nowait(carrier.mark(stream_id, data))
        elif action == "clear":
            outbox.put_nowait(carrier.clear(stream_id))

    call = PhoneCall(
        carrier.name,
        protocol.phone,
        encoding,
        idle_timeout_s=profile.idle_timeout_s,
        on_end=lambda reason: outbox.put_nowait(None),
    )
    call.info = {
        "from": start.caller,
        "to": start.callee,
        "carrier_call_id": start.call_id,
        "stream_id": stream_id,
    }
    playout = MarkedPlayout(call.on_playback, to_carrier)
    call.answered(playout)
    preamble = opening(protocol.phone, profile, encoding)
    start_call(ctx, protocol, call, lambda: preamble, ws.client.host if ws.client else None)

    async def write() -> None:
        while (frame := await outbox.get()) is not None:
            await socket.send(frame)

    writer = asyncio.create_task(write())
    stopped = False
    try:
        ended = asyncio.ensure_future(call.wait_ended())
        while not call.ended:
            receiving = asyncio.ensure_future(socket.receive())
            await asyncio.wait({receiving, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not receiving.done():
                receiving.cancel()
                break
            frame = receiving.result()
            if frame is None:
                call.dropped = True
                call.end("the stream closed")
                break
            try:
                event = carrier.parse(frame)
            except OmnivoxError as err:
                ctx.metrics.error(err.code)
                continue
            if isinstance(event, StreamMedia):
                call.caller_audio(event.payload)
            elif isinstance(event, StreamMark):
                playout.marked(event.name)
            elif isinstance(event, StreamDtmf):
                call.caller_dtmf(event.digit)
            elif isinstance(event, StreamStop):
                stopped = True
                call.end(f"{carrier.name} stopped the stream")
        ended.cancel()
    finally:
        call.end("the stream handler ended")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 2.0)
        writer.cancel()
        # hanging up a stream is closing it; after the carrier's stop it is only tidying up
        await socket.close(1000)
        log.debug("%s stream %s over (stopped by the carrier: %s)", carrier.name, stream_id, stopped)


def carrier_named(name: str) -> Carrier | None:
    return CARRIERS.get(name)
