"""Mount every registered wire protocol on the gateway, each on the one client edge (and its HTTP
side: ephemeral keys, WebRTC calls).

``ClientSockets`` hands client WebSockets straight to the edge, before the HTTP framework's routing
and middleware, which keep about 10 KiB per open socket (measured with 1,000 clients waiting in the
queue: FastAPI's and Starlette's per-connection scopes, exit stacks and wrappers). Everything else
(HTTP, lifespan, unknown paths) goes to the app.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, WebSocket
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

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


class ClientSockets:
    """An ASGI app: client WebSockets of every protocol go to the edge directly, the rest to ``app``."""

    def __init__(self, app: FastAPI) -> None:
        self.app: ASGIApp = app
        self.ctx: GatewayContext = app.state.ctx
        self.routes: list[tuple[re.Pattern[str], WireProtocol]] = [
            (compile_path(protocol.path)[0], protocol) for protocol in PROTOCOLS
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            for pattern, protocol in self.routes:
                match = pattern.match(scope["path"])
                if match is not None:
                    scope["path_params"] = match.groupdict()
                    scope["app"] = self.app
                    await serve_client(WebSocket(scope, receive, send), protocol, self.ctx)
                    return
        await self.app(scope, receive, send)
