"""A recording WebSocket relay between a realtime client and omnivox (test instrumentation).

Third-party clients (pipecat, LiveKit Agents, the Agents SDK) do not all expose the raw events they
send and receive. Pointed at this relay instead of the gateway, each one's traffic passes through
unchanged (the request path and query, ``Authorization`` and ``OpenAI-Beta`` headers, every frame,
the close code) and is recorded both ways with its arrival time, so a test can say what the client
sent (its truncate) and what the server answered (an error, ``conversation.item.truncated``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

Side = Literal["client", "server"]
FORWARDED_HEADERS = ("authorization", "openai-beta")


@dataclass(frozen=True)
class Frame:
    """One event that crossed the relay: ``sender`` sent it at ``at`` (monotonic seconds)."""

    at: float
    sender: Side
    event: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.event.get("type", ""))


class WireTap:
    """A relay on a free loopback port to ``upstream`` (``ws://host:port``), recording every event.

    ``async with WireTap(cluster.ws) as tap:`` then point the client at ``tap.ws`` (or ``tap.http``).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.frames: list[Frame] = []
        self.connections = 0
        self._new = asyncio.Event()
        self._server: Any = None
        self._port = 0

    async def __aenter__(self) -> WireTap:
        self._server = await serve(self._relay, "127.0.0.1", 0, max_size=None, ping_interval=None)
        self._port = next(iter(self._server.sockets)).getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self._port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # ---- reading what was recorded

    def sent(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """Events the client sent (of type ``kind``, whose fields equal ``match``)."""
        return self._events("client", kind, match)

    def received(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """Events the server sent to the client."""
        return self._events("server", kind, match)

    def errors(self) -> list[dict[str, Any]]:
        """The ``error`` payloads the server sent."""
        return [e["error"] for e in self.received("error")]

    def extensions(self) -> list[str]:
        """Types of the server's ``omnivox.*`` events (which a stock client does not know)."""
        return [e["type"] for e in self.received() if str(e.get("type", "")).startswith("omnivox.")]

    def audio_ms(self, response_id: str, after: float = 0.0) -> float:
        """Milliseconds of PCM16 24 kHz audio of ``response_id`` the server sent after ``after``."""
        import base64

        return sum(
            len(base64.b64decode(f.event["delta"])) / 48
            for f in self.frames
            if f.sender == "server"
            and f.at > after
            and f.type in ("response.output_audio.delta", "response.audio.delta")
            and f.event.get("response_id") == response_id
        )

    def when(self, event: dict[str, Any]) -> float:
        """When ``event`` (one of the recorded dicts) crossed the relay."""
        return next(f.at for f in self.frames if f.event is event)

    def types(self, sender: Side = "server") -> list[str]:
        """The event types ``sender`` sent, in order, audio deltas and appends left out."""
        skip = ("response.output_audio.delta", "input_audio_buffer.append")
        return [f.type for f in self.frames if f.sender == sender and f.type not in skip]

    async def wait_for(
        self, kind: str, sender: Side = "server", count: int = 1, timeout: float = 20.0, **match: Any
    ) -> dict[str, Any]:
        """The ``count``-th event of type ``kind`` from ``sender`` whose fields equal ``match``
        (``a__b`` names a nested field); a TimeoutError lists what was seen instead."""
        if not await wait_until(lambda: len(self._events(sender, kind, match)) >= count, self._new, timeout):
            raise TimeoutError(
                f"the {sender} sent no {kind} {match or ''} (#{count}) in {timeout}s; "
                f"the server sent {self.types('server')}, the client sent {self.types('client')}"
            )
        return self._events(sender, kind, match)[count - 1]

    def _events(self, sender: Side, kind: str | None, match: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            f.event
            for f in self.frames
            if f.sender == sender
            and (kind is None or f.type == kind)
            and all(_field(f.event, k) == v for k, v in match.items())
        ]

    # ---- relaying

    async def _relay(self, client: ServerConnection) -> None:
        self.connections += 1
        request = client.request
        assert request is not None
        headers = [(k, v) for k, v in request.headers.raw_items() if k.lower() in FORWARDED_HEADERS]
        try:
            upstream = await connect(
                self.upstream + request.path, additional_headers=headers, max_size=None, ping_interval=None
            )
        except Exception:
            await client.close(1011, "the relay could not reach the server")
            return
        async with upstream:
            pumps = [
                asyncio.create_task(self._pump(client, upstream, "client")),
                asyncio.create_task(self._pump(upstream, client, "server")),
            ]
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            # the side that closed first decides the close code the other side sees
            for side, other in ((upstream, client), (client, upstream)):
                if side.close_code is not None:
                    await other.close(side.close_code if side.close_code != 1006 else 1011, side.close_reason)
        await client.close()

    async def _pump(self, source: Any, sink: Any, sender: Side) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in source:
                self._record(sender, message)
                await sink.send(message)

    def _record(self, sender: Side, message: str | bytes) -> None:
        try:
            event = json.loads(message)
        except ValueError:
            event = {"type": "<not json>", "raw": message[:200]}
        if not isinstance(event, dict):
            event = {"type": "<not an object>", "raw": event}
        self.frames.append(Frame(time.monotonic(), sender, event))
        self._new.set()


async def wait_until(ready: Callable[[], bool], new: asyncio.Event, timeout: float) -> bool:
    """Wait until ``ready()`` holds, checking it each time ``new`` is set; False if ``timeout`` ran out."""
    deadline = time.monotonic() + timeout
    while not ready():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        new.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(new.wait(), left)
    return True


def _field(event: dict[str, Any], dotted: str) -> Any:
    value: Any = event
    for part in dotted.split("__"):
        value = value.get(part) if isinstance(value, dict) else None
    return value
