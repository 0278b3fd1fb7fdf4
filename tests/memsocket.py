"""An in-memory WebSocket for session-layer tests: what a peer sends, what it received, how it closed.

A test plays the peer: ``feed`` frames for the server side to receive, ``hang_up`` to vanish
(``dropped``) or ``close_from_peer`` to close cleanly; ``sent`` holds what the server side wrote.
``gate`` (set by default) lets a test hold the server's writes to model a peer that stops reading.
"""

from __future__ import annotations

import asyncio

from omnivox.connection.sockets import PeerGone


class MemorySocket:
    def __init__(self) -> None:
        self._incoming: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.sent: list[str | bytes] = []
        self.closed_with: int | None = None
        self.dropped = False
        self.close_code: int | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_sends = False
        self.wrote = asyncio.Event()
        self.sending = asyncio.Event()  # the server side has started a write

    # ---- the peer's side

    def feed(self, *frames: str | bytes) -> None:
        for frame in frames:
            self._incoming.put_nowait(frame)

    def hang_up(self) -> None:
        """The peer vanishes without a close frame."""
        self.dropped = True
        self._incoming.put_nowait(None)

    def close_from_peer(self, code: int = 1000) -> None:
        self.close_code = code
        self._incoming.put_nowait(None)

    # ---- the Socket interface

    async def receive(self) -> str | bytes | None:
        return await self._incoming.get()

    async def send(self, frame: str | bytes) -> None:
        self.sending.set()
        await self.gate.wait()
        if self.fail_sends or self.closed_with is not None:
            raise PeerGone("closed")
        self.sent.append(frame)
        self.wrote.set()

    async def close(self, code: int = 1000) -> None:
        if self.closed_with is None:
            self.closed_with = code
        self._incoming.put_nowait(None)

    async def wait_sent(self, n: int, timeout: float = 2.0) -> list[str | bytes]:
        """Wait until ``n`` frames were written; returns them."""
        async with asyncio.timeout(timeout):
            while len(self.sent) < n:
                self.wrote.clear()
                await self.wrote.wait()
        return self.sent[:n]
