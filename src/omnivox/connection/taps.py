"""Taps: observers that see every frame a relay passes, in order, without slowing it.

Each tap gets a bounded queue and a task of its own. The relay only appends to the queues; if a tap
falls ``limit`` frames behind, further frames are dropped for it (and counted), never waited for.
Recording is one tap, metrics another.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

log = logging.getLogger(__name__)


class Direction(StrEnum):
    TO_WORKER = "to_worker"
    TO_CLIENT = "to_client"


@dataclass(frozen=True)
class Frame:
    direction: Direction
    at: float  # monotonic time the relay passed it on
    data: str | bytes
    internal: bool = False  # worker -> gateway only: taken out of the stream, never reaches the client


class Tap(Protocol):
    async def see(self, frame: Frame) -> None: ...


class _Feed:
    def __init__(self, tap: Tap, limit: int) -> None:
        self.tap = tap
        self.limit = limit
        self.queue: deque[Frame] = deque()
        self.ready = asyncio.Event()
        self.dropped = 0
        self.seen = 0

        self.idle = asyncio.Event()  # nothing queued and nothing being seen
        self.idle.set()

    def push(self, frame: Frame) -> None:
        if len(self.queue) >= self.limit:
            self.dropped += 1
            return
        self.queue.append(frame)
        self.idle.clear()
        self.ready.set()

    async def run(self) -> None:
        while True:
            while not self.queue:
                self.idle.set()
                self.ready.clear()
                await self.ready.wait()
            frame = self.queue.popleft()
            try:
                await self.tap.see(frame)
            except Exception:
                log.exception("tap %s failed on a frame", type(self.tap).__name__)
            self.seen += 1


class Taps:
    """The taps of one session; ``see`` is what the relay calls (it never blocks)."""

    def __init__(self, taps: list[Tap] | tuple[Tap, ...] = (), limit: int = 1024) -> None:
        self._feeds = [_Feed(tap, limit) for tap in taps]
        self._tasks: list[asyncio.Task[None]] = []

    def see(self, frame: Frame) -> None:
        for feed in self._feeds:
            feed.push(frame)

    @property
    def dropped(self) -> int:
        return sum(f.dropped for f in self._feeds)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(f.run(), name="tap") for f in self._feeds]

    async def close(self, timeout_s: float = 2.0) -> None:
        """Let the taps see what is queued (bounded), then stop them."""
        if self._tasks:
            waits = [asyncio.ensure_future(f.idle.wait()) for f in self._feeds]
            _, pending = await asyncio.wait(waits, timeout=timeout_s)
            for w in pending:
                w.cancel()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
