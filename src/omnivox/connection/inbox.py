"""What a connection's receive task hands on: an ordered channel with a byte budget.

``put`` waits while the channel holds more than its budget (so a fast sender is slowed to the speed
of whoever takes from it); ``offer`` takes an item only if it fits (frames a client sends while it
waits for a worker are held up to a bound, later ones are refused). ``unget`` puts an item back at
the front: a consumer that took one item too many (its turn ended) gives it back for the next one.
``close`` ends the channel: ``get`` returns ``None`` once it is drained. One consumer at a time.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Inbox(Generic[T]):
    def __init__(self, budget_bytes: int = 1 << 20) -> None:
        self.budget = budget_bytes
        self.bytes = 0
        self.closed = False
        self._items: deque[tuple[T, int]] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def __len__(self) -> int:
        return len(self._items)

    async def put(self, item: T, size: int = 0) -> None:
        while not self.closed and self.bytes > self.budget:
            await self._room.wait()
        self._push(item, size, front=False)

    def offer(self, item: T, size: int, budget: int | None = None) -> bool:
        """Add ``item`` if it keeps the channel within ``budget`` (default: its own); False if not."""
        if self.closed or self.bytes + size > (self.budget if budget is None else budget):
            return False
        self._push(item, size, front=False)
        return True

    async def get(self) -> T | None:
        while not self._items:
            if self.closed:
                return None
            await self._ready.wait()
        item, size = self._items.popleft()
        self.bytes -= size
        self._update()
        return item

    def unget(self, item: T, size: int = 0) -> None:
        self._push(item, size, front=True)

    def close(self) -> None:
        self.closed = True
        self._ready.set()
        self._room.set()

    def _push(self, item: T, size: int, front: bool) -> None:
        if front:
            self._items.appendleft((item, size))
        else:
            self._items.append((item, size))
        self.bytes += size
        self._update()

    def _update(self) -> None:
        if self._items or self.closed:
            self._ready.set()
        else:
            self._ready.clear()
        if self.bytes <= self.budget or self.closed:
            self._room.set()
        else:
            self._room.clear()
