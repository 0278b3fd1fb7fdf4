"""``SimpleScheduler``: compute per request, or one batch compute over whatever is waiting.

For stages with no per-request state between steps (preprocessing, encoders, a no-op): its thread
takes a request, computes, and puts the result or the error. With ``batch_compute`` it takes all
that waits (up to ``max_batch``) and computes them in one call. A compute function may also return
an iterator: each item is streamed, and the request's result follows the last one (``{}``, or the
iterator's return value). A request whose input comes as a stream is computed at its end on
``{"chunks": [...], **done}``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
    Scheduler,
    Tombstones,
    error_message,
)

Values = dict[str, Any]
Compute = Callable[[Values], Values | Iterator[Values]]
BatchCompute = Callable[[list[Values]], list[Values]]


class SimpleScheduler(Scheduler):
    def __init__(
        self,
        compute: Compute | None = None,
        *,
        batch_compute: BatchCompute | None = None,
        max_batch: int = 8,
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if (compute is None) == (batch_compute is None):
            raise ValueError("give exactly one of compute and batch_compute")
        self.compute = compute
        self.batch_compute = batch_compute
        self.max_batch = max(1, max_batch)
        self.info = dict(info or {})
        self._aborted = Tombstones()
        self._streams: dict[str, list[Values]] = {}  # requests whose input is still streaming in
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = False
        self.batches = 0
        self.batch_items = 0
        self.done = 0

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="simple-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._running = False
        self.inbox.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def abort(self, request_id: str) -> None:
        with self._lock:
            self._aborted.add(request_id)
            self._streams.pop(request_id, None)

    def load(self) -> dict[str, float]:
        return {
            "queue": float(self.inbox.qsize()),
            "streams": float(len(self._streams)),
            "batches": float(self.batches),
            "batch_items": float(self.batch_items),
            "done": float(self.done),
        }

    # ---- the thread

    def _loop(self) -> None:
        while self._running:
            first = self.inbox.get()
            if first is None or not self._running:
                return
            ready = self._ready([first, *self._more()])
            if ready:
                self.batches += 1
                self.batch_items += len(ready)
                if self.batch_compute is not None:
                    self._run_batch(ready)
                else:
                    for request_id, values in ready:
                        self._run_one(request_id, values)

    def _more(self) -> list[IncomingMessage]:
        """What else waits, up to the batch size (never blocks)."""
        more: list[IncomingMessage] = []
        while len(more) < self.max_batch - 1:
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                break
            if msg is None:
                self._running = False
                break
            more.append(msg)
        return more

    def _ready(self, messages: list[IncomingMessage | None]) -> list[tuple[str, Values]]:
        """The requests these messages make computable now (stream chunks are buffered)."""
        ready = []
        with self._lock:
            for msg in messages:
                if msg is None or msg.request_id in self._aborted:
                    continue
                if msg.type == "new_request":
                    if msg.data.get("streaming"):
                        self._streams[msg.request_id] = []
                    else:
                        ready.append((msg.request_id, msg.data))
                elif msg.type == "stream_chunk":
                    self._streams.setdefault(msg.request_id, []).append(msg.data)
                else:
                    chunks = self._streams.pop(msg.request_id, [])
                    ready.append((msg.request_id, {**msg.data, "chunks": chunks}))
        return ready

    def _run_one(self, request_id: str, values: Values) -> None:
        assert self.compute is not None
        try:
            out = self.compute(values)
            if isinstance(out, dict):
                self._emit(OutgoingMessage(request_id, "result", out))
                return
            result: Values = {}
            while True:
                if request_id in self._aborted or not self._running:
                    return
                try:
                    item = next(out)
                except StopIteration as end:
                    result = end.value or {}
                    break
                self._emit(OutgoingMessage(request_id, "stream", item))
            self._emit(OutgoingMessage(request_id, "result", result))
        except Exception as exc:
            self._emit(error_message(request_id, exc))

    def _run_batch(self, ready: list[tuple[str, Values]]) -> None:
        assert self.batch_compute is not None
        try:
            results = self.batch_compute([values for _, values in ready])
            if len(results) != len(ready):
                raise RuntimeError(f"batch compute gave {len(results)} results for {len(ready)} inputs")
        except Exception as exc:
            for request_id, _ in ready:
                self._emit(error_message(request_id, exc))
            return
        for (request_id, _), result in zip(ready, results, strict=True):
            self._emit(OutgoingMessage(request_id, "result", result))

    def _emit(self, msg: OutgoingMessage) -> None:
        with self._lock:
            if msg.request_id in self._aborted or not self._running:
                return
            if msg.type != "stream":
                self.done += 1
            self.outbox.put(msg)
