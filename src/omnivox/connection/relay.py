"""The relay: frames between a client connection and a worker socket, both ways, until one ends.

Client frames come from the session's inbox (filled by the client connection's receive task) and go
to the worker as they are; worker frames go to the client's outbox, except internal ones (worker ->
gateway, see ``protocol.control.internal``), which go to ``control`` instead, and those the client did not ask
for (``withheld``). Every frame, internal ones included, is shown to the taps with its time and
direction; taps never slow the relay.

When ``control`` says the worker is done (a turn is over), the relay *holds*: client frames stay in
the inbox for whoever reads next (the next turn), while the worker's last frames still reach the
client, until the worker closes (or ``hold_timeout_s`` runs out). A client that sends its next
message the moment it hears the end of a turn so never reaches the worker that just finished.

``run`` returns how it ended: the client's inbox closed, the worker's socket closed (or dropped:
``worker_dropped``), and whether the worker had said it was done (``held``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from omnivox.connection.inbox import Inbox
from omnivox.connection.sockets import PeerGone, Socket
from omnivox.connection.taps import Direction, Frame
from omnivox.protocol.control.internal import is_internal
from omnivox.protocol.spec import Withheld


@dataclass(frozen=True)
class Inbound:
    """A client frame on its way to a worker, and what the gateway parsed of it (if it did)."""

    raw: str | bytes
    msg: object | None = None

    @property
    def size(self) -> int:
        return len(self.raw)


class ClientSink(Protocol):
    async def send_wait(self, frame: str | bytes) -> None: ...


@dataclass(frozen=True)
class RelayEnd:
    side: Literal["client", "worker"]
    worker_dropped: bool = False  # the worker's connection dropped without a close frame
    worker_code: int | None = None  # the close code the worker sent
    held: bool = False  # the worker said it was done before it closed


class Relay:
    def __init__(
        self,
        source: Inbox[Inbound],
        sink: ClientSink,
        worker: Socket,
        *,
        see: Callable[[Frame], None] = lambda frame: None,
        control: Callable[[str], bool] = lambda frame: False,
        withheld: Withheld | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.sink = sink
        self.worker = worker
        self.see = see
        self.control = control  # an internal frame; True: the worker is done, hold the client's frames
        self.withheld = withheld  # frames the client is not sent (the taps see them)
        self.clock = clock
        self._stopping = False
        self._held = asyncio.Event()

    async def run(self, worker_close_timeout_s: float = 5.0, hold_timeout_s: float = 5.0) -> RelayEnd:
        up = asyncio.create_task(self._to_worker(), name="relay-up")
        down = asyncio.create_task(self._to_client(), name="relay-down")
        held = asyncio.ensure_future(self._held.wait())
        try:
            done, _ = await asyncio.wait({up, down, held}, return_when=asyncio.FIRST_COMPLETED)
            if held in done and down not in done:
                # the worker is done: its last frames still come; then it closes
                done, _ = await asyncio.wait({down}, timeout=hold_timeout_s)
                if not done:
                    return RelayEnd("worker", held=True)
            elif down not in done and up.result() is None:
                # a send to the worker failed: its receiving side says how it went
                done, _ = await asyncio.wait({down}, timeout=worker_close_timeout_s)
                if not done:
                    return RelayEnd("worker", worker_dropped=True)
        finally:
            held.cancel()
            self._stopping = True
            for task in (up, down):
                task.cancel()
            await asyncio.wait({up, down})  # (a cancellation of our own still propagates)
        end = down.result() if down in done else up.result()
        assert end is not None
        return end

    async def _to_worker(self) -> RelayEnd | None:
        while (item := await self.source.get()) is not None:
            if self._stopping or self._held.is_set():  # it belongs to whoever reads next
                self.source.unget(item, item.size)
                await asyncio.Event().wait()  # until the relay ends
            self.see(Frame(Direction.TO_WORKER, self.clock(), item.raw))
            try:
                await self.worker.send(item.raw)
            except PeerGone:
                return None
        return RelayEnd("client")

    async def _to_client(self) -> RelayEnd:
        while (frame := await self.worker.receive()) is not None:
            if is_internal(frame):
                self.see(Frame(Direction.TO_CLIENT, self.clock(), frame, internal=True))
                if self.control(frame):
                    self._held.set()
                continue
            self.see(Frame(Direction.TO_CLIENT, self.clock(), frame))
            if self.withheld is None or not self.withheld(frame):
                await self.sink.send_wait(frame)
        return self._ended_by_worker()

    def _ended_by_worker(self) -> RelayEnd:
        return RelayEnd("worker", self.worker.dropped, self.worker.close_code, self._held.is_set())
