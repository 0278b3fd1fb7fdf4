"""What lands on this gateway but belongs to another one sharing its store: a WebRTC call's sideband
WebSocket is proxied to the gateway holding the call (browsers follow no WebSocket redirects), its
hang-up passed on. Each goes on with the key the client offered here (in a header, whatever way it
came), so the gateway holding the call decides what that key may do with it: only there is it
known which ephemeral key opened the call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import httpx
import websockets
from websockets.exceptions import ConnectionClosed

from omnivox.connection.sockets import Socket
from omnivox.core.config import Settings
from omnivox.core.keys import bearer
from omnivox.gateway.edges.worker_link import CONNECT_FAILURES


def _ws_url(base: str, path: str, query: str) -> str:
    root = base.rstrip("/")
    scheme = "wss://" if root.startswith("https://") else "ws://"
    return scheme + root.split("://", 1)[-1] + path + (f"?{query}" if query else "")


async def proxy_sideband(
    socket: Socket, owner: str, path: str, query: str, settings: Settings, key: str | None
) -> None:
    """Relay ``socket`` both ways to the sideband of the call on ``owner`` (a gateway's base URL),
    offering ``key`` (the client's) there, until either side ends."""
    url = _ws_url(owner, path, query)
    try:
        upstream = await websockets.connect(
            url,
            additional_headers=bearer(key),
            max_size=settings.max_message_bytes * 2,
        )
    except CONNECT_FAILURES:
        await socket.close(1011)
        return

    async def down() -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in upstream:
                await socket.send(frame)

    async def up() -> None:
        while (frame := await socket.receive()) is not None:
            await upstream.send(frame)

    tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await upstream.close()
        await socket.close(1000)


async def pass_on(owner: str, method: str, path: str, headers: Mapping[str, str]) -> httpx.Response:
    """An HTTP request (a call's hang-up) to the gateway holding what it names."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        return await client.request(method, owner.rstrip("/") + path, headers=dict(headers))
