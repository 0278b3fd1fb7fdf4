"""The frames waiting to go to one peer, in order, written by one emit task.

Frames may carry a ``tag`` and a ``weight`` (a realtime response's audio deltas carry the response id
and their milliseconds of audio): ``drop(tag)`` removes the unsent ones of a tag at once (a cancelled
reply's audio) and says how much weight went. ``put`` never blocks (control messages, errors);
``put_wait`` waits while ``limit`` frames are queued, so a relay feeding a slow reader slows down
instead of queueing without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass


@dataclass
class Outgoing:
    frame: str | bytes
    tag: str | None = None
    weight: float = 0.0


class Outbox:
    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._queue: deque[Outgoing] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._empty = asyncio.Event()  # nothing queued and nothing being written
        self._empty.set()
        self._writing = False  # the emit task took a frame and has not said it was written
        self.sent = 0
        self.bytes = 0  # size of the frames queued (not yet taken by the emit task)

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, frame: str | bytes, *, tag: str | None = None, weight: float = 0.0) -> None:
        self._queue.append(Outgoing(frame, tag, weight))
        self.bytes += len(frame)
        self._changed()

    async def put_wait(self, frame: str | bytes, *, tag: str | None = None, weight: float = 0.0) -> None:
        while len(self._queue) >= self.limit:
            self._room.clear()
            await self._room.wait()
        self.put(frame, tag=tag, weight=weight)

    def drop(self, tag: str) -> float:
        """Drop the unsent frames tagged ``tag``; returns their total weight."""
        kept: deque[Outgoing] = deque()
        dropped = 0.0
        for out in self._queue:
            if out.tag == tag:
                dropped += out.weight
                self.bytes -= len(out.frame)
            else:
                kept.append(out)
        self._queue = kept
        self._changed()
        return dropped

    async def get(self) -> Outgoing:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        out = self._queue.popleft()
        self.bytes -= len(out.frame)
        self._writing = True
        self._changed()
        return out

    def done(self) -> None:
        """The emit task wrote the frame it got."""
        self.sent += 1
        self._writing = False
        self._changed()

    async def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until everything queued is written, the frame being written included;
        False if time ran out."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._empty.wait(), timeout_s)
            return True
        return False

    def _changed(self) -> None:
        if self._queue:
            self._ready.set()
        if self._queue or self._writing:
            self._empty.clear()
        else:
            self._empty.set()
        if len(self._queue) < self.limit:
            self._room.set()
