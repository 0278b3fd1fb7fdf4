"""Mount every registered wire protocol on the gateway, each on the one client edge (and its HTTP
side: ephemeral keys, WebRTC calls)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, WebSocket

from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.call_routes import mount_http
from omnivox.gateway.edges.client import serve_client
from omnivox.protocol.registry import PROTOCOLS
from omnivox.protocol.spec import WireProtocol


def _endpoint(protocol: WireProtocol, ctx: GatewayContext) -> Callable[[WebSocket], Awaitable[None]]:
    async def endpoint(ws: WebSocket) -> None:
        await serve_client(ws, protocol, ctx)

    endpoint.__name__ = f"{protocol.name}_edge"
    return endpoint


def mount_protocols(app: FastAPI, ctx: GatewayContext) -> None:
    for protocol in PROTOCOLS:
        app.add_api_websocket_route(protocol.path, _endpoint(protocol, ctx))
        mount_http(app, protocol, ctx)  # ephemeral keys and WebRTC calls, where the protocol serves them
