"""``StreamingScheduler``: streams in fixed slots with per-request state, stepped in batches.

Seed 003's Code2Wav shape (``new_request`` makes a request's state, ``stream_chunk`` feeds it,
``stream_done`` flushes it and ends it with a result) over fixed slots (Unmute's batched
STT): at most ``slots`` requests hold a state at once; a new one waits (FIFO, its chunks buffered)
until a slot is free; a freed slot is reset before the next request gets it. A request the handler
says needs no slot (a one-shot clip) is stepped beside the slotted ones.

Each loop takes every message waiting, hands them to their states (cheap: buffering), then calls
``handler.step`` once with every state that has work, so the model computes one batch for all of
them (the ASR decodes every due transcript at once; the TTS interleaves sentences). The model logic
is the handler's; this class only keeps slots, order, aborts and figures.
"""

from __future__ import annotations

import collections
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
    Scheduler,
    Tombstones,
    error_message,
)

S = TypeVar("S")
Values = dict[str, Any]
Output = tuple[Literal["stream", "result"], Values]


class StreamHandler(Protocol[S]):
    """The model side of a streaming stage. Called from the scheduler's thread only."""

    def needs_slot(self, data: Values) -> bool:
        """Whether a request with this input holds a slot (streams do; a one-shot clip may not)."""
        ...

    def open(self, slot: int | None, data: Values) -> S:
        """A new request's state (in ``slot``, None for a slotless one)."""
        ...

    def chunk(self, state: S, data: Values) -> None:
        """Take the next piece of the request's input stream (buffer it; ``step`` does the work)."""
        ...

    def done(self, state: S, data: Values) -> None:
        """The input stream ended: the rest is flushed by the next steps, then the result."""
        ...

    def pending(self, state: S) -> bool:
        """Whether ``step`` has work for this state now."""
        ...

    def step(self, states: list[S]) -> list[list[Output]]:
        """Do the due work of these states in one batch; per state, the outputs in order (a
        ``result`` ends the request)."""
        ...

    def close(self, state: S) -> None:
        """Free the request's state (finished or aborted)."""
        ...

    def reset_slot(self, slot: int) -> None:
        """Put a freed slot back to a fresh state before its next request."""
        ...


@dataclass
class _Request(Generic[S]):
    request_id: str
    state: S
    slot: int | None


@dataclass
class _Waiting:
    request_id: str
    data: Values
    later: list[IncomingMessage] = field(default_factory=list)  # chunks that came while it waited


class StreamingScheduler(Scheduler, Generic[S]):
    def __init__(self, handler: StreamHandler[S], slots: int, *, info: dict[str, Any] | None = None) -> None:
        super().__init__()
        if slots < 1:
            raise ValueError("a streaming scheduler needs at least one slot")
        self.handler = handler
        self.slots: list[str | None] = [None] * slots
        self.info = {"slots": slots, **(info or {})}
        self._active: dict[str, _Request[S]] = {}
        self._waiting: collections.OrderedDict[str, _Waiting] = collections.OrderedDict()
        self._aborts: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._aborted = Tombstones()
        self._thread: threading.Thread | None = None
        self._running = False
        self._emit_lock = threading.Lock()
        self.steps = 0  # figures for the heartbeat (batch occupancy = batch_items / steps / slots)
        self.batch_items = 0
        self.slot_steps = 0  # sum over steps of the slots held then
        self.resets = 0

    @property
    def slots_used(self) -> int:
        return sum(1 for s in self.slots if s is not None)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="streaming-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._emit_lock:
            self._running = False
        self.inbox.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        for request_id in list(self._active):
            self._finish(request_id)

    def abort(self, request_id: str) -> None:
        with self._emit_lock:
            self._aborted.add(request_id)
        self._aborts.put(request_id)
        self.inbox.put(None)  # wake the loop (None is also stop's wake-up; _running says which)

    def load(self) -> dict[str, float]:
        own = getattr(self.handler, "load", None)  # a handler may add its model's figures
        return {
            **(own() if callable(own) else {}),
            "slots_total": float(len(self.slots)),
            "slots_used": float(self.slots_used),
            "queue": float(len(self._waiting)),
            "running": float(len(self._active)),
            "steps": float(self.steps),
            "batch_items": float(self.batch_items),
            "slot_steps": float(self.slot_steps),
            "resets": float(self.resets),
        }

    # ---- the thread

    def _loop(self) -> None:
        while self._running:
            busy = any(self.handler.pending(r.state) for r in self._active.values())
            messages: list[IncomingMessage | None] = []
            if not busy:
                messages.append(self.inbox.get())
            while True:
                try:
                    messages.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            if not self._running:
                return
            self._take_aborts()
            for msg in messages:
                if msg is not None and msg.request_id not in self._aborted:
                    self._apply(msg)
            self._step()

    def _take_aborts(self) -> None:
        while True:
            try:
                request_id = self._aborts.get_nowait()
            except queue.Empty:
                return
            self._waiting.pop(request_id, None)
            if request_id in self._active:
                self._finish(request_id)

    def _apply(self, msg: IncomingMessage) -> None:
        rid = msg.request_id
        try:
            if msg.type == "new_request":
                if rid not in self._active and rid not in self._waiting:
                    self._waiting[rid] = _Waiting(rid, msg.data)
                    self._admit()
            elif rid in self._waiting:
                self._waiting[rid].later.append(msg)
            elif rid in self._active:
                request = self._active[rid]
                if msg.type == "stream_chunk":
                    self.handler.chunk(request.state, msg.data)
                else:
                    self.handler.done(request.state, msg.data)
        except Exception as exc:
            self._fail(rid, exc)

    def _admit(self) -> None:
        """Give waiting requests states, in order, while slots allow (slotless ones always go)."""
        for rid, waiting in list(self._waiting.items()):
            try:
                slot: int | None = None
                if self.handler.needs_slot(waiting.data):
                    free = [i for i, holder in enumerate(self.slots) if holder is None]
                    if not free:
                        continue  # a slotless request behind it may still go
                    slot = free[0]
                del self._waiting[rid]
                state = self.handler.open(slot, waiting.data)
                if slot is not None:
                    self.slots[slot] = rid
                self._active[rid] = _Request(rid, state, slot)
                for later in waiting.later:
                    self._apply(later)
            except Exception as exc:
                self._waiting.pop(rid, None)
                self._fail(rid, exc)

    def _step(self) -> None:
        due = [r for r in self._active.values() if self.handler.pending(r.state)]
        if not due:
            return
        self.steps += 1
        self.batch_items += len(due)
        self.slot_steps += self.slots_used
        try:
            outputs = self.handler.step([r.state for r in due])
        except Exception as exc:
            for request in due:
                self._fail(request.request_id, exc)
            return
        for request, outs in zip(due, outputs, strict=True):
            for kind, data in outs:
                self._emit(OutgoingMessage(request.request_id, kind, data))
                if kind == "result":
                    self._finish(request.request_id)
                    break

    def _fail(self, request_id: str, exc: BaseException) -> None:
        self._emit(error_message(request_id, exc))
        if request_id in self._active:
            self._finish(request_id)

    def _finish(self, request_id: str) -> None:
        request = self._active.pop(request_id, None)
        if request is None:
            return
        try:
            self.handler.close(request.state)
        finally:
            if request.slot is not None:
                self.handler.reset_slot(request.slot)
                self.resets += 1
                self.slots[request.slot] = None
                self._admit()

    def _emit(self, msg: OutgoingMessage) -> None:
        with self._emit_lock:
            if self._running and msg.request_id not in self._aborted:
                self.outbox.put(msg)
