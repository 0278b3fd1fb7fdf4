"""The client side: how an engine (in a worker) submits requests to a pipeline and reads what comes back.

``PipelineClient`` owns one DEALER socket to the coordinator on an IO thread of its own; the
engine's threads call ``submit`` and the ``Request`` methods, which hand messages over to that
thread (payloads are packed in the caller's thread, so a payload too large is refused at once).
What comes back for a request lands in its queue: ``Event`` s (stream chunks from a stage, then the
merged result), or the request's error raised from ``Request.next``.

The client says hello as its heartbeat. A coordinator that stops answering for ``lost_after_s``, or
answers as a new process (another epoch), fails every request in flight with ``stage_lost``; the next
request goes through once it is back.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from omnivox.core.errors import OmnivoxError, StageLost, StageUnavailable, pipeline_error
from omnivox.pipeline import transport
from omnivox.pipeline.messages import (
    CLIENT,
    Abort,
    Directory,
    Failed,
    Hello,
    Message,
    RequestResult,
    StageInfo,
    StreamChunk,
    StreamDone,
    Submit,
    Welcome,
)
from omnivox.pipeline.relay import PayloadRelay, host_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    kind: str  # "stream" (a chunk from ``source``) or "result" (the end: ``parts`` by exit stage)
    source: str
    values: dict[str, Any]
    parts: dict[str, dict[str, Any]] | None = None


class Request:
    """One request in flight. Its methods are safe from any thread."""

    def __init__(self, client: PipelineClient, request_id: str, entry_host: str | None) -> None:
        self.client = client
        self.request_id = request_id
        self._entry_host = entry_host
        self._events: queue.SimpleQueue[Event | OmnivoxError] = queue.SimpleQueue()
        self._seq = itertools.count()
        self.finished = False

    def stream(self, values: dict[str, Any]) -> None:
        """Send the next chunk of this request's input stream to its entry stage."""
        payload, frames = self.client._pack(values, self._entry_host)
        self.client._post(StreamChunk(self.request_id, CLIENT, payload, None, next(self._seq)), frames)

    def done(self, values: dict[str, Any] | None = None) -> None:
        """End the input stream (the entry stage flushes and finishes)."""
        payload, frames = self.client._pack(values or {}, self._entry_host)
        self.client._post(StreamDone(self.request_id, CLIENT, None, payload), frames)

    def close(self, values: dict[str, Any] | None = None) -> None:
        """End the input stream and stop listening: what the stage still sends is dropped (a
        session's hearing, ended with the session)."""
        if not self.finished:
            self.done(values)
            self.finished = True
            self.client._forget(self.request_id)

    def abort(self, reason: str = "aborted") -> None:
        """Stop the request in every stage at once; harmless if it has ended."""
        if not self.finished:
            self.finished = True
            self.client._forget(self.request_id)
            self.client._post(Abort(self.request_id, reason), [])

    def next(self, timeout: float | None = None) -> Event | None:
        """The next event (None after ``timeout`` seconds); raises the request's error."""
        try:
            item = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, OmnivoxError):
            self.finished = True
            raise item
        if item.kind == "result":
            self.finished = True
        return item

    def events(self, stop: threading.Event | None = None, poll_s: float = 0.02) -> Iterator[Event]:
        """Every event up to and including the result; with ``stop``, ends (aborting) once it is set."""
        while not self.finished:
            if stop is not None and stop.is_set():
                self.abort("stopped")
                return
            event = self.next(poll_s if stop is not None else None)
            if event is not None:
                yield event

    def _deliver(self, item: Event | OmnivoxError) -> None:
        self._events.put(item)


class PipelineClient:
    def __init__(
        self,
        coordinator: str,
        *,
        name: str = "client",
        heartbeat_s: float = 0.2,
        lost_after_s: float = 1.5,
        relay: PayloadRelay | None = None,
        context: zmq.Context[Any] | None = None,
        key: str | None = None,
    ) -> None:
        """``key``: the worker key, when the pipeline has one (CurveZMQ)."""
        self.coordinator = coordinator
        self._curve = transport.curve_keys(key)
        self.name = name
        self.heartbeat_s = heartbeat_s
        self.lost_after_s = lost_after_s
        self.relay = relay or PayloadRelay()
        self._relay_lock = threading.Lock()
        self._ctx = context or zmq.Context.instance()
        self._outgoing: queue.SimpleQueue[tuple[Message, Sequence[Any]]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._requests: dict[str, Request] = {}
        self._lock = threading.Lock()
        self.stages: dict[str, StageInfo] = {}
        self.epoch: str | None = None
        self.pipeline: str | None = None
        self.ready = threading.Event()  # a Welcome came, and the coordinator is answering
        self._last_heard = 0.0
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pipeline-client", daemon=True)
        self._thread.start()

    # ---- the API (any thread)

    def wait_ready(self, timeout: float) -> bool:
        return self.ready.wait(timeout)

    def submit(
        self,
        values: dict[str, Any] | None = None,
        *,
        entries: Sequence[str] = (),
        exits: Sequence[str] = (),
        traceparent: str | None = None,
    ) -> Request:
        """Start a request entering at ``entries`` (default: the spec's) for the results of ``exits``
        (``traceparent``: the span it belongs to, which the coordinator's and stages' continue)."""
        if not self.ready.is_set():
            raise StageUnavailable(f"the pipeline coordinator at {self.coordinator} is not answering")
        rid = secrets.token_hex(8)
        entry = self.stages.get(entries[0]) if len(entries) == 1 else None
        request = Request(self, rid, entry.host if entry is not None else None)
        payload, frames = self._pack(values or {}, request._entry_host)
        with self._lock:
            self._requests[rid] = request
        self._post(Submit(rid, payload, None, list(entries), list(exits), traceparent or ""), frames)
        return request

    def in_flight(self) -> int:
        with self._lock:
            return len(self._requests)

    def close(self) -> None:
        self._closing.set()
        self._wake()
        self._thread.join(5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- hand-over to the IO thread

    def _pack(self, values: dict[str, Any], host: str | None) -> tuple[Any, list[Any]]:
        with self._relay_lock:
            return self.relay.pack(values, same_host=host == host_id())

    def _post(self, message: Message, frames: Sequence[Any]) -> None:
        self._outgoing.put((message, frames))
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"!")

    def _forget(self, request_id: str) -> None:
        with self._lock:
            self._requests.pop(request_id, None)

    # ---- the IO thread

    def _loop(self) -> None:
        ident = f"client:{self.name}:{os.getpid()}:{secrets.token_hex(4)}".encode()
        sock = transport.socket(self._ctx, zmq.DEALER, identity=ident, curve=self._curve)
        sock.connect(self.coordinator)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        next_hello = 0.0
        try:
            while not self._closing.is_set():
                ready = dict(poller.poll(int(self.heartbeat_s * 500)))
                if sock in ready:
                    self._receive(sock)
                with contextlib.suppress(BlockingIOError, OSError):
                    os.read(self._wake_r, 4096)
                self._send_all(sock)
                now = time.monotonic()
                if now >= next_hello:
                    with contextlib.suppress(OmnivoxError):
                        transport.send(sock, Hello(self.name, host_id()))
                    next_hello = now + self.heartbeat_s
                if self.ready.is_set() and now - self._last_heard > self.lost_after_s:
                    self.ready.clear()
                    self._fail_all(
                        StageLost(f"the pipeline coordinator at {self.coordinator} stopped answering")
                    )
        finally:
            sock.close(0)
            self._fail_all(StageLost("the pipeline client closed"))
            with self._relay_lock:
                self.relay.close()

    def _send_all(self, sock: zmq.Socket[Any]) -> None:
        while True:
            try:
                message, frames = self._outgoing.get_nowait()
            except queue.Empty:
                return
            try:
                transport.send(sock, message, frames)
            except OmnivoxError as err:
                with self._relay_lock:
                    self.relay.discard(getattr(message, "payload", None))
                rid = getattr(message, "request_id", None)
                if rid is not None and not isinstance(message, Abort):
                    self._deliver(rid, err if self.ready.is_set() else StageLost(err.message))

    def _receive(self, sock: zmq.Socket[Any], limit: int = 256) -> None:
        for _ in range(limit):
            try:
                got = transport.receive(sock)
            except zmq.Again:
                return
            message, frames = got.message, got.frames
            self._last_heard = time.monotonic()
            if message is not None:
                self._handle(message, frames)
            if not transport.readable(sock):
                return

    def _handle(self, message: Message, frames: Sequence[Any]) -> None:
        if isinstance(message, Welcome | Directory):
            if self.epoch is not None and message.epoch != self.epoch:
                self._fail_all(StageLost("the pipeline coordinator restarted"))
            self.epoch = message.epoch
            self.stages = dict(message.stages)
            if isinstance(message, Welcome):
                self.pipeline = message.spec
                self.ready.set()
        elif isinstance(message, StreamChunk):
            self._deliver_values(message.request_id, "stream", message.source, message.payload, frames)
        elif isinstance(message, RequestResult):
            self._result(message, frames)
        elif isinstance(message, Failed):
            self._deliver(message.request_id, pipeline_error(message.code, message.message), end=True)

    def _deliver_values(self, rid: str, kind: str, source: str, payload: Any, frames: Sequence[Any]) -> None:
        with self._lock:
            request = self._requests.get(rid)
        with self._relay_lock:
            if request is None:
                self.relay.discard(payload)
                return
            try:
                values = self.relay.unpack(payload, frames)
            except OmnivoxError as err:
                self._deliver(rid, err, end=True)
                return
        request._deliver(Event(kind, source, values))

    def _result(self, message: RequestResult, frames: Sequence[Any]) -> None:
        with self._lock:
            request = self._requests.pop(message.request_id, None)
        with self._relay_lock:
            if request is None:
                for part in message.parts.values():
                    self.relay.discard(part)
                return
            parts: dict[str, dict[str, Any]] = {}
            failure: OmnivoxError | None = None
            for stage, part in message.parts.items():
                if failure is not None:
                    self.relay.discard(part)  # read none of the rest, but free them
                    continue
                try:
                    parts[stage] = self.relay.unpack(part, frames)
                except OmnivoxError as err:
                    failure = err
            if failure is not None:
                request._deliver(failure)
                return
        values = parts[next(iter(parts))] if len(parts) == 1 else {}
        request._deliver(Event("result", message.source, values, parts))

    def _deliver(self, rid: str, err: OmnivoxError, end: bool = True) -> None:
        with self._lock:
            request = self._requests.pop(rid, None) if end else self._requests.get(rid)
        if request is not None:
            request._deliver(err)

    def _fail_all(self, err: OmnivoxError) -> None:
        with self._lock:
            requests, self._requests = list(self._requests.values()), {}
        for request in requests:
            request._deliver(err)
