"""The scheduler contract: what a stage hands its work to, whatever model runs behind it.

A stage (``pipeline.stage``) is an IO shell; a scheduler owns the compute. They meet at two queues
(SGLang-Omni's interface; vllm/v1/core/sched/interface.py's spirit: a small contract, testable on the
CPU with fake inputs):

- ``inbox``: ``IncomingMessage`` s the stage puts (a new request, a chunk of a request's input
  stream, the end of that stream);
- ``outbox``: ``OutgoingMessage`` s the scheduler puts (a stream chunk, the request's result, an
  error), which the stage drains and routes. ``SchedulerOutbox`` wakes the stage's IO loop through a file
  descriptor, so results leave without polling delays.

The stage never asks which scheduler it has. Every scheduler honours the same promises: each
request it accepts ends with exactly one ``result`` or one ``error`` unless it is aborted (then it
ends silently); ``stream`` messages of a request come before its result, in order; ``abort`` of an
unknown or finished request does nothing; after ``stop`` nothing more is put in the outbox.
"""

from __future__ import annotations

import contextlib
import os
import queue
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from omnivox.core.errors import as_omnivox_error

IncomingType = Literal["new_request", "stream_chunk", "stream_done"]
OutgoingType = Literal["result", "stream", "error"]


@dataclass(frozen=True)
class IncomingMessage:
    request_id: str
    type: IncomingType
    data: dict[str, Any]  # new_request: the request's input (fan-in: one entry per source stage)


@dataclass(frozen=True)
class OutgoingMessage:
    request_id: str
    type: OutgoingType
    data: dict[str, Any]  # error: {"code", "message"}
    target: str | None = None  # None: the request plan's targets for this stage
    metadata: dict[str, Any] | None = None  # what the stage reports with it (timings)


def error_message(request_id: str, exc: BaseException) -> OutgoingMessage:
    err = as_omnivox_error(exc)
    return OutgoingMessage(request_id, "error", {"code": err.code, "message": err.message})


class SchedulerOutbox(queue.Queue[OutgoingMessage]):
    """A queue whose every ``put`` also makes ``fileno()`` readable (a pipe), so an IO loop polling
    sockets wakes for scheduler output at once. ``drain`` takes everything and clears the signal."""

    def __init__(self) -> None:
        super().__init__()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def _put(self, item: OutgoingMessage) -> None:
        super()._put(item)
        with contextlib.suppress(BlockingIOError, OSError):  # a full pipe is signalled already
            os.write(self._w, b"!")

    def fileno(self) -> int:
        return self._r

    def drain(self) -> list[OutgoingMessage]:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._r, 4096):
                pass
        items = []
        while True:
            try:
                items.append(self.get_nowait())
            except queue.Empty:
                return items

    def close(self) -> None:
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)


class Tombstones:
    """Ids of aborted requests, remembered for a while (bounded), so their late messages are dropped."""

    def __init__(self, keep: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self.keep = keep

    def add(self, request_id: str) -> None:
        self._ids[request_id] = None
        self._ids.move_to_end(request_id)
        while len(self._ids) > self.keep:
            self._ids.popitem(last=False)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._ids


class Scheduler(ABC):
    """What a stage runs its requests on. Thread-safe where it says so; everything else is called from
    the stage's IO thread only."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {}  # what the stage's model tells clients (voices, slots)
        self.inbox: queue.Queue[IncomingMessage | None] = queue.Queue()
        self.outbox = SchedulerOutbox()

    @abstractmethod
    def start(self) -> None:
        """Start taking work from ``inbox`` (threads of its own). Called once, before any message."""

    @abstractmethod
    def stop(self) -> None:
        """Stop: work in flight is dropped, its per-request state freed, and nothing more reaches the
        outbox once this returns. Safe to call twice."""

    @abstractmethod
    def abort(self, request_id: str) -> None:
        """Drop ``request_id`` wherever it is (waiting, running, half-streamed): its state (slot, KV
        cache, buffers) is freed and it produces no more output. Unknown or finished ids are ignored.
        Thread-safe: the stage calls it from its IO thread while the scheduler works."""

    def load(self) -> dict[str, float]:
        """Figures for the stage's heartbeat (queue, running, slots_used, slots_total, batches,
        batch_items, ...). Read from another thread: approximate is fine."""
        return {}
