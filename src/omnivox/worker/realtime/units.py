"""Named, replaceable units of work owned by one session (Unmute's quests, pipecat's task manager).

Starting a unit under a name that is taken cancels the old one first; ``close`` cancels them all
with a timeout. A unit that fails reports to ``on_error`` (the session's supervisor decides); none
outlives the session, and none is left without an owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class WorkUnits:
    def __init__(self, on_error: Callable[[str, BaseException], None], cancel_timeout_s: float = 2.0) -> None:
        self._units: dict[str, asyncio.Task[Any]] = {}
        self._on_error = on_error
        self._timeout = cancel_timeout_s

    def running(self, name: str) -> bool:
        task = self._units.get(name)
        return task is not None and not task.done()

    async def start(self, name: str, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` as unit ``name``, replacing (cancelling, then awaiting) the one running."""
        await self.cancel(name)
        task = asyncio.create_task(work, name=f"unit:{name}")
        self._units[name] = task
        task.add_done_callback(lambda t: self._done(name, t))
        return task

    async def cancel(self, name: str) -> None:
        task = self._units.pop(name, None)
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(task), self._timeout)
        if not task.done():
            log.error("unit %s did not stop within %.1fs", name, self._timeout)

    async def close(self) -> None:
        for name in list(self._units):
            await self.cancel(name)

    def _done(self, name: str, task: asyncio.Task[Any]) -> None:
        if self._units.get(name) is task:
            del self._units[name]
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._on_error(name, exc)
