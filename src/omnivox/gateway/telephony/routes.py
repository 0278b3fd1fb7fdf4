"""Mount the phone edge on the gateway: the carriers' stream sockets and webhooks, and (with
``--sip-port``) the SIP user agent with its call-control API."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, Response

from omnivox.core.errors import InvalidMessage, OmnivoxError
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.call_routes import check_client, http_error, json_body
from omnivox.gateway.telephony.call import PhoneState
from omnivox.gateway.telephony.sip import SipEdge
from omnivox.gateway.telephony.streams import serve_stream, twilio_voice
from omnivox.protocol.registry import PROTOCOLS
from omnivox.protocol.spec import WireProtocol
from omnivox.telephony.carriers import CARRIERS, Carrier


def phone_protocol() -> WireProtocol | None:
    """The protocol phone calls are carried over (the one whose description has a phone bridge)."""
    return next((p for p in PROTOCOLS if p.phone is not None), None)


def _stream(
    carrier: Carrier, protocol: WireProtocol, ctx: GatewayContext
) -> Callable[[WebSocket], Awaitable[None]]:
    async def endpoint(ws: WebSocket) -> None:
        await serve_stream(ws, carrier, protocol, ctx)

    endpoint.__name__ = f"{carrier.name}_stream"
    return endpoint


def mount_telephony(app: FastAPI, ctx: GatewayContext) -> None:
    protocol = phone_protocol()
    if protocol is None:
        return
    for carrier in CARRIERS.values():
        app.add_api_websocket_route(f"/telephony/{carrier.name}/stream", _stream(carrier, protocol, ctx))

    async def voice(request: Request) -> Response:
        return await twilio_voice(request, ctx)

    app.add_api_route("/telephony/twilio/voice", voice, methods=["POST"])
    if ctx.settings.sip_port is not None:
        mount_sip(app, ctx, protocol)


def mount_sip(app: FastAPI, ctx: GatewayContext, protocol: WireProtocol) -> None:
    """The SIP user agent (started with the app) and its call control, as OpenAI's SIP calls have:
    ``POST {path}/calls/{call_id}/accept`` (a session config), ``/reject`` (``status_code``),
    ``/refer`` (``target_uri``); ``/hangup`` and the sideband are every call's. And omnivox's own
    ``POST {path}/calls/dial`` (``dial.DialRequest``): 201 ``{call_id, status, ...}``, or 502
    ``dial_failed`` with the ``outcome`` and ``sip_status``."""
    edge = SipEdge(ctx, protocol)
    app.state.sip = edge

    async def accept(call_id: str, request: Request) -> Response:
        return await _control(request, ctx, lambda body: edge.accept(call_id, _session(protocol, body)))

    async def reject(call_id: str, request: Request) -> Response:
        return await _control(request, ctx, lambda body: edge.reject(call_id, _status(body)))

    async def refer(call_id: str, request: Request) -> Response:
        return await _control(request, ctx, lambda body: edge.refer(call_id, _target(body)))

    for name, handler in (("accept", accept), ("reject", reject), ("refer", refer)):
        app.add_api_route(f"{protocol.path}/calls/{{call_id}}/{name}", handler, methods=["POST"])

    async def dial(request: Request) -> Response:
        try:
            check_client(request, ctx)
            call = await edge.dial(await json_body(request))
        except OmnivoxError as err:
            ctx.metrics.error(err.code)
            response = http_error(err)
            if err.details.get("outcome"):  # a dial that failed says how
                body = json.loads(bytes(response.body))
                body["error"].update({k: v for k, v in err.details.items() if k != "param"})
                return JSONResponse(body, status_code=err.http_status)
            return response
        status = "answered" if call.state is PhoneState.ACTIVE else "ringing"
        return JSONResponse({"call_id": call.id, "status": status, **call.info}, status_code=201)

    app.add_api_route(f"{protocol.path}/calls/dial", dial, methods=["POST"])


async def _control(request: Request, ctx: GatewayContext, act: Callable[[dict[str, Any]], None]) -> Response:
    try:
        check_client(request, ctx)
        act(await json_body(request))
    except OmnivoxError as err:
        ctx.metrics.error(err.code)
        return http_error(err)
    return Response(status_code=200)


def _session(protocol: WireProtocol, body: dict[str, Any]) -> dict[str, Any] | None:
    if not body:
        return None
    session = {k: v for k, v in body.items() if k != "type"}
    protocol.session_defaults(session)  # raises InvalidMessage naming the field
    return session


def _status(body: dict[str, Any]) -> int:
    status = body.get("status_code", 603)
    if not isinstance(status, int) or isinstance(status, bool) or not 300 <= status <= 699:
        raise InvalidMessage("status_code must be a SIP status from 300 to 699", param="status_code")
    return status


def _target(body: dict[str, Any]) -> str:
    target = body.get("target_uri")
    if not isinstance(target, str) or not target.startswith(("sip:", "sips:", "tel:")) or len(target) > 512:
        raise InvalidMessage("target_uri must be a sip:, sips: or tel: URI", param="target_uri")
    if any(c in target for c in '\r\n<>"'):
        raise InvalidMessage("target_uri holds characters a URI cannot", param="target_uri")
    return target
