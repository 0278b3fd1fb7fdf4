"""The engine host: one engine, its worker-side state machine, and the thread it runs in.

Engine calls go through one single-thread executor, the engine thread, so they are serialised
(engines are not thread-safe) and never block the event loop; a voice session's listener and replies
run on its agent's own input and output threads instead (the threading rule: ``agent.threads``,
docs/architecture.md). One session holds the host at a time.

Fencing: a gateway's session comes with the epoch of its assignment (bumped by the scheduler for
every assignment of this worker). The host takes only epochs newer than any it has seen: an older
one comes from a gateway that paused past its lease while the worker went to someone else, an equal
one is a second session for the same assignment; both are refused at once. The highest epoch is in
the health report, so a scheduler that lost its state (a restarted store) assigns newer ones; but only
once the session has started (or was refused, or ended): a report of IDLE with the new epoch tells the
gateway that the assignment's session is over, so between taking the epoch and starting the session
(waiting for the previous one to wind down) the report keeps the epoch before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.agent.threads import iterate_in_thread
from omnivox.core import transitions
from omnivox.core.errors import OmnivoxError, StaleAssignment, WorkerBusy, WorkerUnavailable, as_omnivox_error
from omnivox.engines.base import (
    ChatModel,
    Engine,
    GenChunk,
    GenerateParams,
    GenResult,
    PrefillStats,
    capabilities_of,
)
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState

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


class EngineHost:
    def __init__(self, engine: Engine, session_wait_s: float = 5.0) -> None:
        self.engine = engine
        self.capabilities: Capabilities = engine.capabilities  # declared; derived once loaded
        self.state = WorkerState.LOADING
        self.error: str | None = None
        self.sessions_served = 0
        self.session_wait_s = session_wait_s
        self.epoch = 0  # the highest fencing epoch of a session offered to this worker
        self.reported_epoch = 0  # the epoch health reports: of a session started, refused or ended
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
            self.capabilities = capabilities_of(self.engine)  # what its roles serve
            self.transition(WorkerState.IDLE)

    def health(self) -> WorkerHealth:
        idle = self.state is WorkerState.IDLE
        return WorkerHealth(
            status="ok" if self.state is not WorkerState.ERROR else "error",
            state=self.state,
            engine=self.engine.name,
            capabilities=self.capabilities,
            kv_length=self.kv_length if idle else 0,
            cached_hash=history_hash(self.held_messages() if idle else []),
            sessions_served=self.sessions_served,
            error=self.error,
            voices=list(self.engine.voices),
            epoch=self.reported_epoch,
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

    def begin(self, state: WorkerState) -> None:
        """The session taken with ``acquire`` starts, in ``state``."""
        self.transition(state)
        self.settle()

    def settle(self) -> None:
        """No session is being started: health may report the highest epoch seen."""
        self.reported_epoch = self.epoch

    def refused(self, epoch: int | None) -> None:
        """A session of ``epoch`` was refused; if it was the newest offered, its assignment is over
        and the report may say so."""
        if epoch is not None and epoch == self.epoch:
            self.settle()

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
            self.settle()
            self.sessions_served += 1
            self._session.release()

    # ---- the turn-based role (worker.streaming)

    @property
    def kv_length(self) -> int:
        chat = self.engine.chat
        return chat.kv_length if chat is not None else 0

    def held_messages(self) -> list[ChatMessage]:
        chat = self.engine.chat
        return chat.held_messages() if chat is not None else []

    def _chat(self) -> ChatModel:
        chat = self.engine.chat
        if chat is None:
            raise WorkerUnavailable(f"engine {self.engine.name} cannot serve streaming sessions")
        return chat

    # ---- engine calls

    async def call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def prefill(self, messages: list[ChatMessage], clear: bool) -> PrefillStats:
        chat = self._chat()

        def work() -> PrefillStats:
            if clear:
                chat.reset()
            return chat.prefill(messages)

        return await self.call(work)

    async def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> AsyncIterator[GenChunk]:
        """Run the chat role's ``generate`` in the engine thread and yield its chunks here.

        If the consumer goes away (cancellation), ``stop`` is set and this waits for the engine to
        finish, so the next session finds it quiet.
        """
        chat = self._chat()
        chunks: AsyncGenerator[GenChunk, None] = iterate_in_thread(
            lambda: chat.generate(params, stop, result), self._executor, stop
        )
        async with contextlib.aclosing(chunks):
            try:
                async for chunk in chunks:
                    yield chunk
            except OmnivoxError:
                raise
            except Exception as exc:
                raise as_omnivox_error(exc) from exc

    async def close(self, timeout_s: float = 5.0) -> None:
        """Worker shutdown: the engine releases what it holds (``Engine.close``: a model's memory, the
        pipeline's connection) in its own thread, after any call it is still in (up to ``timeout_s``:
        a stuck engine does not hold the process's exit), then its thread ends."""
        try:
            await asyncio.wait_for(self.call(self.engine.close), timeout_s)
        except Exception:  # (shutting down: say so, and go on with the other seats)
            log.exception("engine %s did not close cleanly", self.engine.name)
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
