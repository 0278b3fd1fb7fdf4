"""Named, replaceable units of work owned by one session (Unmute's quests, pipecat's task manager).

Rules, which follow asyncio's:
- ``start(name, work)`` replaces the unit running under ``name``: the old one is cancelled and
  awaited (up to the timeout) before the new one starts.
- A caller cancelled while it waits for a unit to stop is cancelled: its ``CancelledError``
  propagates, it is never swallowed. The unit being stopped stays owned until it ends.
- A unit may end itself: ``cancel(name)`` or ``start(name, ...)`` from inside that very unit does
  not cancel it (a task cancelling itself would carry a pending cancellation into whatever it does
  next); it is detached from its name and runs on to its own end, still owned.
- A unit that ignores cancellation past the timeout is reported to ``on_stuck``; one that fails is
  reported to ``on_error`` (the session's supervisor decides what that means).
- ``close`` cancels every unit, each with the timeout; none outlives its session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


def _log_stuck(name: str) -> None:
    log.error("unit %s did not stop within its cancel timeout", name)


class WorkUnits:
    def __init__(
        self,
        on_error: Callable[[str, BaseException], None],
        cancel_timeout_s: float = 2.0,
        on_stuck: Callable[[str], None] = _log_stuck,
    ) -> None:
        self._units: dict[str, asyncio.Task[Any]] = {}
        self._owned: set[asyncio.Task[Any]] = set()  # every unit task until it ends
        self._on_error = on_error
        self._on_stuck = on_stuck
        self._timeout = cancel_timeout_s

    def running(self, name: str) -> bool:
        task = self._units.get(name)
        return task is not None and not task.done()

    def __len__(self) -> int:
        """Unit tasks still owned (running, being stopped, or detached)."""
        return sum(1 for t in self._owned if not t.done())

    async def start(self, name: str, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` as unit ``name``, replacing (cancelling, then awaiting) the one running."""
        try:
            await self.cancel(name)
        except BaseException:
            work.close()  # never started: do not leave a coroutine that was never awaited
            raise
        task = asyncio.create_task(work, name=f"unit:{name}")
        self._units[name] = task
        self._owned.add(task)
        task.add_done_callback(lambda t: self._done(name, t))
        return task

    async def cancel(self, name: str) -> None:
        """Stop unit ``name`` and wait (up to the timeout) until it has. Raises CancelledError if the
        caller is cancelled meanwhile; the unit is still stopped and stays owned."""
        task = self._units.pop(name, None)
        if task is None or task.done():
            return
        if task is asyncio.current_task():
            return  # a unit ending itself: detached from its name, it returns on its own
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=self._timeout)
        if not done:
            self._on_stuck(name)

    async def close(self) -> None:
        """Cancel every unit (each with the timeout) and wait for detached ones as long."""
        for name in list(self._units):
            await self.cancel(name)
        rest = {t for t in self._owned if not t.done() and t is not asyncio.current_task()}
        for task in rest:
            task.cancel()
        if rest:
            _, pending = await asyncio.wait(rest, timeout=self._timeout)
            for task in pending:
                self._on_stuck(task.get_name().removeprefix("unit:"))

    def _done(self, name: str, task: asyncio.Task[Any]) -> None:
        self._owned.discard(task)
        if self._units.get(name) is task:
            del self._units[name]
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._on_error(name, exc)
