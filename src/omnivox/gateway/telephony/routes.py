"""Mount the phone edge on the gateway: the carriers' stream sockets and webhooks, and (with
``--sip-port``) the SIP user agent with its call-control API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import Response

from omnivox.gateway.context import GatewayContext
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
