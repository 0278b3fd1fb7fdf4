"""``ParallelScheduler``: requests run side by side on a runtime that batches them itself.

llama.cpp's server keeps ``n_parallel`` slots and batches their decode steps internally; a remote
OpenAI-compatible server (vLLM, SGLang) batches continuously on its own. Behind the scheduler
contract such a runtime needs only a thread per slot: ``run(data, stop, emit)`` serves one request,
streaming with ``emit`` and returning its result; ``abort`` sets the request's ``stop``. At most
``slots`` run at once; the rest wait in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
    Scheduler,
    Tombstones,
    error_message,
)

Values = dict[str, Any]
Run = Callable[[Values, threading.Event, Callable[[Values], None]], Values]


class ParallelScheduler(Scheduler):
    def __init__(self, run: Run, *, slots: int = 4, info: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.run = run
        self.slots = max(1, slots)
        self.info = {"slots": self.slots, **(info or {})}
        self._pool: ThreadPoolExecutor | None = None
        self._stops: dict[str, threading.Event] = {}
        self._aborted = Tombstones()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._running = False
        self.done = 0
        self.peak = 0
        self.extra_load: Callable[[], dict[str, float]] | None = None  # the runtime's own figures

    def start(self) -> None:
        self._running = True
        self._pool = ThreadPoolExecutor(self.slots, thread_name_prefix="parallel-slot")
        self._thread = threading.Thread(target=self._loop, name="parallel-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._running = False
            for stop in self._stops.values():
                stop.set()
        self.inbox.put(None)
        if self._thread is not None:
            self._thread.join(5)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def abort(self, request_id: str) -> None:
        with self._lock:
            self._aborted.add(request_id)
            stop = self._stops.get(request_id)
            if stop is not None:
                stop.set()

    def load(self) -> dict[str, float]:
        with self._lock:
            running = len(self._stops)
        return {
            **(self.extra_load() if self.extra_load is not None else {}),
            "slots_total": float(self.slots),
            "slots_used": float(min(running, self.slots)),
            "running": float(running),
            "queue": float(max(0, running - self.slots) + self.inbox.qsize()),
            "done": float(self.done),
            "peak": float(self.peak),
        }

    def _loop(self) -> None:
        while self._running:
            msg = self.inbox.get()
            if msg is None or not self._running:
                continue
            if msg.type != "new_request":
                continue  # input is the request itself: stream messages are not for this stage
            with self._lock:
                if msg.request_id in self._aborted or msg.request_id in self._stops:
                    continue
                stop = self._stops[msg.request_id] = threading.Event()
                self.peak = max(self.peak, len(self._stops))
            assert self._pool is not None
            self._pool.submit(self._serve, msg, stop)

    def _serve(self, msg: IncomingMessage, stop: threading.Event) -> None:
        rid = msg.request_id

        def emit(values: Values) -> None:
            self._emit(OutgoingMessage(rid, "stream", values))

        try:
            if not stop.is_set():
                result = self.run(msg.data, stop, emit)
                self._emit(OutgoingMessage(rid, "result", result))
        except Exception as exc:
            self._emit(error_message(rid, exc))
        finally:
            with self._lock:
                self._stops.pop(rid, None)
                self.done += 1

    def _emit(self, msg: OutgoingMessage) -> None:
        with self._lock:
            if self._running and msg.request_id not in self._aborted:
                self.outbox.put(msg)
