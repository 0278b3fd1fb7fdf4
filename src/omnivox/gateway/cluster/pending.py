"""Store operations kept for later: a release, a withdrawal or a lost worker that could not reach
the store is retried, in order, until it does. Each is guarded (by its ticket or epoch), so one that
runs late never frees or fails a later session.

An operation is run to its end even when its caller is cancelled (a session torn down mid-release):
it runs in a task of its own and the caller waits for it shielded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from omnivox.core.errors import StoreUnavailable

Call = Callable[..., Awaitable[Any]]


class Pending:
    def __init__(self, call: Call, resolve: Callable[[list[Any]], None]) -> None:
        self._call = call
        self._resolve = resolve  # what a step dispatched: this gateway's waiters get theirs
        self._ops: list[tuple[str, tuple[str | int, ...]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._ops)

    def later(self, op: str, *args: str | int) -> None:
        """Retry ``op`` once the store answers again (after those already waiting)."""
        self._ops.append((op, args))

    async def retry(self) -> None:
        """Run what waits, in order; raises ``StoreUnavailable`` where the store still fails."""
        while self._ops:
            op, args = self._ops[0]
            reply = await self._call(op, *args)
            self._ops.pop(0)
            self._dispatched(reply)

    async def run(self, op: str, *args: str | int) -> None:
        """Run ``op`` now (or keep it for later); never raises for the store's trouble."""

        async def attempt() -> None:
            if self._ops:  # keep the order: this one goes after those waiting
                self.later(op, *args)
                return
            try:
                reply = await self._call(op, *args)
            except StoreUnavailable:
                self.later(op, *args)
                return
            self._dispatched(reply)

        task = asyncio.ensure_future(attempt())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.shield(task)

    def _dispatched(self, reply: Any) -> None:
        if isinstance(reply, list) and len(reply) > 1 and isinstance(reply[1], list):
            self._resolve(reply[1])
