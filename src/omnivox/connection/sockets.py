"""One message-level interface over the two kinds of WebSocket omnivox holds.

A client's socket on a server is an ASGI WebSocket (starlette's); a gateway's socket to a worker is a
``websockets`` client connection. Both are used as a ``Socket``: ``receive`` returns the next frame
or ``None`` once the peer has gone, ``send`` raises ``PeerGone`` if it has, ``close`` never raises.
After ``receive`` returned ``None``, ``dropped`` says whether the peer vanished without a close
frame (a worker that died) and ``close_code`` which code it closed with.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from websockets.exceptions import ConnectionClosed


class PeerGone(Exception):
    """The other end has gone (closed, or the connection dropped)."""


class Socket(Protocol):
    dropped: bool
    close_code: int | None

    async def receive(self) -> str | bytes | None: ...

    async def send(self, frame: str | bytes) -> None: ...

    async def close(self, code: int = 1000) -> None: ...


class AsgiSocket:
    """An accepted starlette/FastAPI WebSocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.dropped = False
        self.close_code: int | None = None
        self._closed = False

    async def receive(self) -> str | bytes | None:
        if self._closed:
            return None
        try:
            message = await self.ws.receive()
        except (RuntimeError, OSError):  # receive after a disconnect
            self._closed = True
            return None
        if message["type"] == "websocket.disconnect":
            self._closed = True
            self.close_code = message.get("code")
            self.dropped = self.close_code in (None, 1006)
            return None
        text = message.get("text")
        return text if text is not None else (message.get("bytes") or b"")

    async def send(self, frame: str | bytes) -> None:
        try:
            if isinstance(frame, str):
                await self.ws.send_text(frame)
            else:
                await self.ws.send_bytes(frame)
        except Exception as exc:  # starlette and the servers under it raise several kinds
            raise PeerGone(str(exc)) from None

    async def close(self, code: int = 1000) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code)


class ClientSocket:
    """A ``websockets`` client connection (the gateway's link to a worker)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.dropped = False
        self.close_code: int | None = None

    async def receive(self) -> str | bytes | None:
        try:
            return await self.conn.recv()
        except ConnectionClosed as exc:
            self.close_code = exc.rcvd.code if exc.rcvd is not None else None
            self.dropped = exc.rcvd is None
            return None

    async def send(self, frame: str | bytes) -> None:
        try:
            await self.conn.send(frame)
        except ConnectionClosed as exc:
            raise PeerGone(str(exc)) from None

    async def close(self, code: int = 1000) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close(code)
