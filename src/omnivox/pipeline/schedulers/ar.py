"""``ARScheduler``: continuous batching of decode steps across requests, each with its own KV state.

For autoregressive models run in-process (the tiny and transformers LLMs). Requests join and leave
the running batch between steps: each loop admits waiting requests (their prompts are prefilled into
a KV state of their own, at most ``max_running`` held), then runs one decode step over every running
request at once, streams each one's new text, and retires those that finished (the result) or were
aborted (nothing). The model side is an ``ARRunner``; the scheduler never sees tensors.

(For the GGUF model, llama.cpp batches its own parallel slots: ``ParallelScheduler`` puts the same
contract in front of it.)
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any, Generic, Protocol, TypeVar

from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
    Scheduler,
    Tombstones,
    error_message,
)

S = TypeVar("S")
Values = dict[str, Any]


class ARRunner(Protocol[S]):
    """The model side of an AR stage. Called from the scheduler's thread only."""

    def prefill(self, data: Values) -> S:
        """Compute the request's prompt into a KV state of its own (raises for a bad request)."""
        ...

    def decode(self, states: list[S]) -> list[int]:
        """One decode step for all ``states`` in one batch: the next token of each."""
        ...

    def accept(self, state: S, token: int) -> tuple[Values | None, bool]:
        """Take the token into the state: (what to stream for it or None, whether the request is done)."""
        ...

    def result(self, state: S) -> Values:
        """The finished request's result (the whole text, token counts)."""
        ...

    def release(self, state: S) -> None:
        """Free the state's KV cache."""
        ...


class ARScheduler(Scheduler, Generic[S]):
    def __init__(
        self, runner: ARRunner[S], *, max_running: int = 8, info: dict[str, Any] | None = None
    ) -> None:
        super().__init__()
        self.runner = runner
        self.max_running = max(1, max_running)
        self.info = {"max_running": self.max_running, **(info or {})}
        self._waiting: collections.deque[IncomingMessage] = collections.deque()
        self._running_states: dict[str, S] = {}
        self._aborts: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._aborted = Tombstones()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = False
        self.steps = 0
        self.batch_items = 0
        self.live_states = 0  # KV states held now (prefilled, not yet released)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="ar-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._running = False
        self.inbox.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        for request_id in list(self._running_states):
            self._release(request_id)

    def abort(self, request_id: str) -> None:
        with self._lock:
            self._aborted.add(request_id)
        self._aborts.put(request_id)
        self.inbox.put(None)

    def load(self) -> dict[str, float]:
        return {
            "queue": float(len(self._waiting)),
            "running": float(len(self._running_states)),
            "steps": float(self.steps),
            "batch_items": float(self.batch_items),
            "kv_states": float(self.live_states),
        }

    def _loop(self) -> None:
        while self._running:
            if not self._running_states and not self._waiting:
                self._take(self.inbox.get())
            while True:
                try:
                    self._take(self.inbox.get_nowait())
                except queue.Empty:
                    break
            if not self._running:
                return
            self._take_aborts()
            self._admit()
            self._decode()

    def _take(self, msg: IncomingMessage | None) -> None:
        if msg is None or msg.request_id in self._aborted:
            return
        if msg.type == "new_request":
            self._waiting.append(msg)
        # an AR stage's input is its prompt: stream messages for it are ignored

    def _take_aborts(self) -> None:
        while True:
            try:
                request_id = self._aborts.get_nowait()
            except queue.Empty:
                return
            self._waiting = collections.deque(m for m in self._waiting if m.request_id != request_id)
            self._release(request_id)

    def _admit(self) -> None:
        while self._waiting and len(self._running_states) < self.max_running:
            msg = self._waiting.popleft()
            try:
                state = self.runner.prefill(msg.data)
            except Exception as exc:
                self._emit(error_message(msg.request_id, exc))
                continue
            self.live_states += 1
            self._running_states[msg.request_id] = state

    def _decode(self) -> None:
        if not self._running_states:
            return
        ids = list(self._running_states)
        states = [self._running_states[i] for i in ids]
        self.steps += 1
        self.batch_items += len(ids)
        try:
            tokens = self.runner.decode(states)
        except Exception as exc:
            for request_id in ids:
                self._emit(error_message(request_id, exc))
                self._release(request_id)
            return
        for request_id, state, token in zip(ids, states, tokens, strict=True):
            try:
                out, finished = self.runner.accept(state, token)
                if out is not None:
                    self._emit(OutgoingMessage(request_id, "stream", out))
                if finished:
                    self._emit(OutgoingMessage(request_id, "result", self.runner.result(state)))
            except Exception as exc:
                self._emit(error_message(request_id, exc))
                finished = True
            if finished:
                self._release(request_id)

    def _release(self, request_id: str) -> None:
        state = self._running_states.pop(request_id, None)
        if state is not None:
            self.live_states -= 1
            self.runner.release(state)

    def _emit(self, msg: OutgoingMessage) -> None:
        with self._lock:
            if self._running and msg.request_id not in self._aborted:
                self.outbox.put(msg)
