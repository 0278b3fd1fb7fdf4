"""The session's outgoing events, in order, written by one emit task.

Audio deltas queued for a response that gets cancelled are dropped before they are written (and the
audio they carried is reported, so the sender's count of audio sent stays true). Clients that speak
the beta protocol (``OpenAI-Beta: realtime=v1``) get the beta event names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from omnivox.protocol.realtime import BETA_SERVER_TYPES
from omnivox.protocol.wire import Msg


@dataclass
class _Out:
    payload: str
    response_id: str | None = None  # set on audio deltas: what a cancel may drop
    audio_ms: float = 0.0


class Outbox:
    def __init__(self, send: Callable[[str], Awaitable[None]], beta: bool = False) -> None:
        self._send = send
        self._beta = beta
        self._queue: deque[_Out] = deque()
        self._ready = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self.sent = 0

    def put(self, event: Msg, *, response_id: str | None = None, audio_ms: float = 0.0) -> None:
        if self._beta and (beta := BETA_SERVER_TYPES.get(getattr(event, "type", ""))):
            data = event.model_dump(mode="json")
            data["type"] = beta
            payload = json.dumps(data, separators=(",", ":"))
        else:
            payload = event.model_dump_json()
        self._queue.append(_Out(payload, response_id, audio_ms))
        self._empty.clear()
        self._ready.set()

    def drop_audio(self, response_id: str) -> float:
        """Drop the unsent audio deltas of ``response_id``; returns the milliseconds of audio dropped."""
        kept: deque[_Out] = deque()
        dropped = 0.0
        for out in self._queue:
            if out.response_id == response_id:
                dropped += out.audio_ms
            else:
                kept.append(out)
        self._queue = kept
        if not kept:
            self._empty.set()
        return dropped

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def run(self) -> None:
        """The emit task: write events as they come, until cancelled."""
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            out = self._queue.popleft()
            await self._send(out.payload)
            self.sent += 1
            if not self._queue:
                self._empty.set()

    async def drain(self, timeout_s: float) -> None:
        """Wait (bounded) until everything queued is written: the last words before closing."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._empty.wait(), timeout_s)
