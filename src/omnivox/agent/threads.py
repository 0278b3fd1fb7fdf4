"""The one bridge from blocking work on a thread to the event loop, and the threading rule.

The threading rule (docs/architecture.md): model calls block, so they never run on the event loop.
A session's hearing (VAD, ASR: the listener) runs on its agent's input thread and its replies (LLM
-> TTS) on the agent's output thread, so hearing a barge-in never waits for speech synthesis; every
other engine call (turn-based chat, a native duplex model) runs on the worker's one engine thread
(``worker.host``). Each of these threads is a one-thread executor: work on it runs in the order it
was submitted.

``SerialThread`` is that one-thread executor, with ``call``: a call handed to it from the event loop
and awaited there without ``run_in_executor``'s machinery (a ``concurrent.futures`` future with its
condition and callbacks, chained to an asyncio one, and the pool's idle semaphore): the input thread
takes one such call for each chunk the user sends (25 a second a session), and that machinery was a
fifth of a seat's event loop (docs/benchmarks.md, round 4). The same thread wake-up and loop wake-up
per call remain; the call goes through a ``queue.SimpleQueue`` and comes back by one
``call_soon_threadsafe``.

``ThreadStream`` runs a blocking iterator on such an executor and hands its items to the event loop
in order; ``iterate_in_thread`` is the same as an async iterator. Whoever reads it can stop it: the
``stop`` event is set and the thread is waited for, so a stream never outlives its reader by more
than the blocking step it was in (an iterator checks ``stop`` between items).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable
from concurrent.futures import Executor, Future
from typing import Any, Generic, TypeVar

T = TypeVar("T")


# one call for the thread: the function, its arguments, and where its outcome goes (an asyncio future
# on ``loop``, or a concurrent one when ``loop`` is None)
_Outcome = asyncio.Future[Any] | Future[Any]
_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop | None, _Outcome]


def _settle(future: asyncio.Future[Any], ok: bool, outcome: Any) -> None:
    """(The event loop.) The call's outcome, unless its awaiter was cancelled meanwhile."""
    if future.done():
        return
    if ok:
        future.set_result(outcome)
    else:
        future.set_exception(outcome)


def _serve(calls: queue.SimpleQueue[_Call | None]) -> None:
    """(The thread.) Run the calls in the order they came until the ``None`` that ends it. The
    thread holds only the queue: an executor dropped without ``shutdown`` ends it (a finaliser)."""
    while (call := calls.get()) is not None:
        fn, args, loop, future = call
        if loop is None:
            assert isinstance(future, Future)
            if not future.set_running_or_notify_cancel():
                continue  # cancelled before it ran
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            continue
        assert isinstance(future, asyncio.Future)
        if future.done():
            continue  # its awaiter was cancelled before it ran (as ``run_in_executor``: never run)
        try:
            ok, outcome = True, fn(*args)
        except BaseException as exc:  # handed to the awaiter, who decides what it means
            ok, outcome = False, exc
        try:
            loop.call_soon_threadsafe(_settle, future, ok, outcome)
        except RuntimeError:
            pass  # the loop has closed: nobody is waiting any more
        del call, fn, args, future, outcome  # (not kept alive while the thread waits)


class SerialThread(Executor):
    """One thread that runs what it is given in the order it was given (``call`` from the event
    loop, ``submit`` from anywhere). ``shutdown`` ends it after the calls queued before, or drops
    those (``cancel_futures``: their awaiters see them cancelled); nothing is taken after it."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._closing = threading.Lock()  # a put never races the shutdown's end marker
        self._shut = False
        self._thread = threading.Thread(target=_serve, args=(self._calls,), name=name, daemon=True)
        self._thread.start()
        # dropped without shutdown: the thread still ends (it holds the queue, not the executor)
        weakref.finalize(self, self._calls.put, None)

    @property
    def alive(self) -> bool:
        """The thread is still running."""
        return self._thread.is_alive()

    def _put(self, call: _Call) -> None:
        with self._closing:
            if self._shut:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._calls.put(call)

    def call(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """(The event loop.) ``fn(*args)`` on the thread, after what was given before; await the
        future for its result or error. Cancelling the future before the call starts skips it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put((fn, args, loop, future))
        return future

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """``fn(*args, **kwargs)`` on the thread (``concurrent.futures``' interface: from any thread,
        and ``run_in_executor``)."""
        future: Future[T] = Future()
        self._put(((lambda: fn(*args, **kwargs)), (), None, future))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take nothing more; end the thread after the calls queued (``cancel_futures``: drop
        those, cancelled) and, with ``wait``, wait for it."""
        with self._closing:
            if not self._shut:
                self._shut = True
                if cancel_futures:
                    self._drop_queued()
                self._calls.put(None)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()

    def _drop_queued(self) -> None:
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                return
            if call is None:
                continue
            _, _, loop, future = call
            if loop is None:
                future.cancel()
            else:
                try:
                    loop.call_soon_threadsafe(future.cancel)
                except RuntimeError:
                    pass  # the loop has closed


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
