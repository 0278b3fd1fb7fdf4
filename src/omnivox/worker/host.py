"""The engine host: one engine, its worker-side state machine, and the thread it runs in.

All engine calls go through one single-thread executor, so they are serialised (engines are not
thread-safe) and never block the event loop. One session holds the host at a time.

Fencing: a gateway's session comes with the epoch of its assignment (bumped by the scheduler for
every assignment of this worker). The host takes only epochs newer than any it has seen: an older
one comes from a gateway that paused past its lease while the worker went to someone else, an equal
one is a second session for the same assignment; both are refused at once. The highest epoch is in
the health report, so a scheduler that lost its state (a restarted store) assigns newer ones.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.core import transitions
from omnivox.core.errors import StaleAssignment, WorkerBusy, as_omnivox_error
from omnivox.engines.base import Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.protocol.control.workers import WorkerHealth, WorkerState

log = logging.getLogger(__name__)

S = WorkerState
# The worker's own view (the gateway adds OFFLINE on its side).
TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    S.LOADING: frozenset({S.IDLE, S.ERROR}),
    S.IDLE: frozenset({S.BUSY_STREAMING, S.DUPLEX_ACTIVE}),
    S.BUSY_STREAMING: frozenset({S.IDLE}),
    S.DUPLEX_ACTIVE: frozenset({S.DUPLEX_PAUSED, S.IDLE}),
    S.DUPLEX_PAUSED: frozenset({S.DUPLEX_ACTIVE, S.IDLE}),
    S.ERROR: frozenset(),
}

_END = object()


class EngineHost:
    def __init__(self, engine: Engine, session_wait_s: float = 5.0) -> None:
        self.engine = engine
        self.state = WorkerState.LOADING
        self.error: str | None = None
        self.sessions_served = 0
        self.session_wait_s = session_wait_s
        self.epoch = 0  # the highest fencing epoch of a session offered to this worker
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self._session = asyncio.Lock()

    # ---- state

    def transition(self, new: WorkerState) -> None:
        self.state = transitions.check(TRANSITIONS, self.state, new, "worker state")

    async def load(self) -> None:
        """Load the engine in its thread: LOADING -> IDLE, or ERROR with the reason."""
        try:
            await self.call(self.engine.load)
        except Exception as exc:
            log.exception("engine %s failed to load", self.engine.name)
            self.error = f"{type(exc).__name__}: {exc}"
            self.transition(WorkerState.ERROR)
        else:
            self.transition(WorkerState.IDLE)

    def health(self) -> WorkerHealth:
        held = self.engine.held_messages() if self.state is WorkerState.IDLE else []
        return WorkerHealth(
            status="ok" if self.state is not WorkerState.ERROR else "error",
            state=self.state,
            engine=self.engine.name,
            capabilities=self.engine.capabilities,
            kv_length=self.engine.kv_length if self.state is WorkerState.IDLE else 0,
            cached_hash=history_hash(held),
            sessions_served=self.sessions_served,
            error=self.error,
            voices=list(self.engine.voices),
            epoch=self.epoch,
        )

    # ---- sessions

    def fence(self, epoch: int | None) -> None:
        """Take a session's assignment epoch, or raise ``StaleAssignment`` (``None``: the session
        named none, as a client connecting directly does)."""
        if epoch is None:
            return
        if epoch <= self.epoch:
            raise StaleAssignment(
                f"assignment {epoch} is not newer than {self.epoch}, which this worker has seen",
                epoch=epoch,
                seen=self.epoch,
            )
        self.epoch = epoch

    async def acquire(self) -> None:
        """Take the host for one session; waits briefly for the previous one to wind down."""
        if self.state in (WorkerState.LOADING, WorkerState.ERROR):
            raise WorkerBusy(f"worker is {self.state.value}", state=self.state.value)
        try:
            await asyncio.wait_for(self._session.acquire(), self.session_wait_s)
        except TimeoutError:
            raise WorkerBusy("worker is serving another session") from None

    async def release(self) -> None:
        """End the session: work still running for it is interrupted, the engine drops its stream
        state (in its thread, after that work), then the host is free.

        Shielded: a caller being cancelled (its socket torn down) must not let the next session take
        the host before the engine has finished ending this one."""
        self.engine.interrupt.set()
        await asyncio.shield(self._release())

    async def _release(self) -> None:
        def end() -> None:
            try:
                self.engine.end_session()
            finally:
                self.engine.interrupt.clear()  # in the engine's thread: after the interrupted work

        try:
            await self.call(end)
        except Exception:
            log.exception("engine %s failed to end a session", self.engine.name)
        finally:
            if self.state is not WorkerState.IDLE:
                self.transition(WorkerState.IDLE)
            self.sessions_served += 1
            self._session.release()

    # ---- engine calls

    async def call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def prefill(self, messages: list[ChatMessage], clear: bool) -> PrefillStats:
        def work() -> PrefillStats:
            if clear:
                self.engine.reset()
            return self.engine.prefill(messages)

        return await self.call(work)

    async def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> AsyncIterator[GenChunk]:
        """Run ``engine.generate`` in the engine thread and yield its chunks here.

        If the consumer goes away (cancellation), ``stop`` is set and this waits for the engine to
        finish, so the next session finds it quiet.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def work() -> None:
            try:
                for chunk in self.engine.generate(params, stop, result):
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except BaseException as exc:
                loop.call_soon_threadsafe(queue.put_nowait, as_omnivox_error(exc))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, _END)

        done = loop.run_in_executor(self._executor, work)
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            stop.set()
            await asyncio.shield(done)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
