"""A call's sideband WebSockets (``WS {path}?call_id=...``): each hears the call's events and may
send its own, until either ends. Shared by WebRTC and phone calls. The call hears every event (it
acts on omnivox's own: a reply paused over speech); each sideband is sent those its own request asked
for (``withheld``: ``?omnivox_events=true`` on realtime)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from omnivox.connection.sockets import Socket
from omnivox.protocol.spec import Withheld

_QUEUE = 1000  # events a sideband that does not read may fall behind by (later ones it misses)


class Sidebands:
    def __init__(self) -> None:
        # each sideband's queue, and the frames it is not sent (None: every one)
        self._queues: dict[asyncio.Queue[str | None], Withheld | None] = {}

    def publish(self, event: str) -> None:
        for queue, withheld in self._queues.items():
            if withheld is None or not withheld(event):
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(event)

    def close(self) -> None:
        """The call ended: every sideband is told (and closes)."""
        for queue in list(self._queues):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)

    async def attach(
        self,
        socket: Socket,
        ended: asyncio.Event,
        deliver: Callable[[str], None],
        withheld: Withheld | None = None,
    ) -> None:
        """Serve ``socket`` until it or the call (``ended``) ends; its text frames go to ``deliver``;
        it is sent the call's events but those ``withheld`` says it did not ask for."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(_QUEUE)
        self._queues[queue] = withheld

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
            self._queues.pop(queue, None)
            for task in (sender, waiting):
                task.cancel()
            await asyncio.gather(sender, waiting, return_exceptions=True)
            await socket.close(1000)
