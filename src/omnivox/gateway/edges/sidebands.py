"""A call's sideband WebSockets (``WS {path}?call_id=...``): each hears the call's events and may
send its own, until either ends. Shared by WebRTC and phone calls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from omnivox.connection.sockets import Socket

_QUEUE = 1000  # events a sideband that does not read may fall behind by (later ones it misses)


class Sidebands:
    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str | None]] = set()

    def publish(self, event: str) -> None:
        for queue in self._queues:
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)

    def close(self) -> None:
        """The call ended: every sideband is told (and closes)."""
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)

    async def attach(self, socket: Socket, ended: asyncio.Event, deliver: Callable[[str], None]) -> None:
        """Serve ``socket`` until it or the call (``ended``) ends; its text frames go to ``deliver``."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(_QUEUE)
        self._queues.add(queue)

        async def forward() -> None:
            while (event := await queue.get()) is not None:
                await socket.send(event)

        sender = asyncio.create_task(forward())
        waiting = asyncio.create_task(ended.wait())
        try:
            while True:
                receiving = asyncio.ensure_future(socket.receive())
                await asyncio.wait({receiving, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if not receiving.done():  # the call ended first
                    receiving.cancel()
                    break
                frame = receiving.result()
                if frame is None:
                    break
                if isinstance(frame, str):
                    deliver(frame)
        finally:
            self._queues.discard(queue)
            for task in (sender, waiting):
                task.cancel()
            await asyncio.gather(sender, waiting, return_exceptions=True)
            await socket.close(1000)
