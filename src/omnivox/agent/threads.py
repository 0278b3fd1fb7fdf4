"""The one bridge from blocking work on a thread to the event loop, and the threading rule.

The threading rule (docs/architecture.md): model calls block, so they never run on the event loop.
A session's hearing (VAD, ASR: the listener) runs on its agent's input thread and its replies (LLM
-> TTS) on the agent's output thread, so hearing a barge-in never waits for speech synthesis; every
other engine call (turn-based chat, a native duplex model) runs on the worker's one engine thread
(``worker.host``). Each of these threads is a one-thread executor: work on it runs in the order it
was submitted.

``ThreadStream`` runs a blocking iterator on such an executor and hands its items to the event loop
in order; ``iterate_in_thread`` is the same as an async iterator. Whoever reads it can stop it: the
``stop`` event is set and the thread is waited for, so a stream never outlives its reader by more
than the blocking step it was in (an iterator checks ``stop`` between items).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable
from concurrent.futures import Executor
from typing import Generic, TypeVar

T = TypeVar("T")


async def wait_any(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


class _End:
    """The iterator is exhausted."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class ThreadStream(Generic[T]):
    """``items()`` iterated on ``executor`` (None: asyncio's default), read with ``next`` on the loop.

    Items are never None: ``next`` returns None once the stream has ended (or the reader was cut)."""

    def __init__(
        self, items: Callable[[], Iterable[T]], executor: Executor | None, stop: threading.Event
    ) -> None:
        self.stop = stop
        self._items = items
        self._executor = executor
        self._queue: deque[T | _End | _Failed] = deque()  # come, not read yet (event loop only)
        self._arrived = asyncio.Event()
        self._done: asyncio.Future[None] | None = None
        self._over = False

    @property
    def pending(self) -> bool:
        """An item (or the end) has come and not been read yet."""
        return bool(self._queue)

    def start(self) -> None:
        """Submit the iteration (on the event loop, once)."""
        loop = asyncio.get_running_loop()

        def arrive(item: T | _End | _Failed) -> None:
            self._queue.append(item)
            self._arrived.set()

        def put(item: T | _End | _Failed) -> None:
            loop.call_soon_threadsafe(arrive, item)

        def work() -> None:
            try:
                for item in self._items():
                    put(item)
                put(_End())
            except BaseException as exc:  # handed to the reader, who decides what it means
                put(_Failed(exc))

        self._done = loop.run_in_executor(self._executor, work)

    async def next(self, cut: asyncio.Event | None = None) -> T | None:
        """The next item, in order; None once the iteration ended, or as soon as ``cut`` is set
        with nothing come. Raises what the iteration raised."""
        while not self._queue and not self._over:
            if cut is not None and cut.is_set():
                return None
            self._arrived.clear()
            await (wait_any(self._arrived, cut) if cut is not None else self._arrived.wait())
        if self._over:
            return None
        got = self._queue.popleft()
        if isinstance(got, _End):
            self._over = True
            return None
        if isinstance(got, _Failed):
            self._over = True
            raise got.error
        return got

    async def close(self, wait_s: float | None = None) -> None:
        """Stop the iteration and wait for its thread (at most ``wait_s`` seconds; shielded from
        the caller's cancellation, so the thread is never left running unseen)."""
        self.stop.set()
        if self._done is not None:
            await asyncio.wait({asyncio.shield(self._done)}, timeout=wait_s)


async def iterate_in_thread(
    items: Callable[[], Iterable[T]], executor: Executor | None, stop: threading.Event
) -> AsyncGenerator[T, None]:
    """``items()`` on ``executor``, as an async iterator. However the reader leaves (the end, an
    error, cancellation), ``stop`` is set and the thread has finished before this returns."""
    stream: ThreadStream[T] = ThreadStream(items, executor, stop)
    stream.start()
    try:
        while (item := await stream.next()) is not None:
            yield item
    finally:
        await stream.close()
