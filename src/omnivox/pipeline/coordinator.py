"""The coordinator: the pipeline's request router (SGLang-Omni's). It runs no model.

Stages register (and re-register as their heartbeat); clients say hello (also their heartbeat). A
client's ``Submit`` gets a plan from the spec and goes to the plan's entry stages once all of its
stages are registered (PENDING until then, for at most ``request_wait_s``). Stream input from the
client is forwarded to the entry stage; stream chunks and results from stages go back to the client;
when every exit stage's result is in, the client gets them merged in one ``RequestResult``.

Faults are data: a stage that misses its heartbeats for ``lost_after_s`` (killed, hung) or comes
back as a new process is lost, and every request in flight through it fails with ``stage_lost``;
its peers are told to abort those requests (``Abort`` to every stage of the plan), which frees their
slots, KV states and payloads. A client that goes silent for ``client_lost_after_s`` has its
requests aborted the same way. Messages about requests that already ended are dropped harmlessly.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgspec
import zmq

from omnivox.core.errors import OmnivoxError, StageLost, StageUnavailable, as_omnivox_error
from omnivox.core.tracing import child_span, traceparent_of
from omnivox.pipeline import transport
from omnivox.pipeline.connections import ConnectionGuard, ConnectionLimits, guard_listener
from omnivox.pipeline.messages import (
    CLIENT,
    Abort,
    Directory,
    Failed,
    Hello,
    Message,
    Payload,
    Register,
    RegisterAck,
    RequestResult,
    Shutdown,
    StageInfo,
    StreamChunk,
    StreamDone,
    Submit,
    Welcome,
)
from omnivox.pipeline.relay import PayloadRelay
from omnivox.pipeline.requests import RequestState, TrackedRequest
from omnivox.pipeline.scheduler import Tombstones
from omnivox.pipeline.spec import PipelineSpec
from omnivox.pipeline.status import ClientRecord, StageRecord, status_view

log = logging.getLogger(__name__)


class Coordinator:
    def __init__(
        self,
        spec: PipelineSpec,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        heartbeat_s: float = 0.2,
        lost_after_s: float = 3.0,
        client_lost_after_s: float = 3.0,
        request_wait_s: float = 3.0,
        relay: PayloadRelay | None = None,
        context: zmq.Context[Any] | None = None,
        key: str | None = None,
        connections: ConnectionLimits | None = None,
    ) -> None:
        """``key``: the worker key; with one, only its holders reach the coordinator (CurveZMQ).
        ``connections``: what its port holds (idle and surplus connections are closed)."""
        self.spec = spec
        self.heartbeat_s = heartbeat_s
        self.lost_after_s = lost_after_s
        self.client_lost_after_s = client_lost_after_s
        self.request_wait_s = request_wait_s
        self.relay = relay or PayloadRelay()
        self._ctx = context or zmq.Context.instance()
        limits = connections or ConnectionLimits()
        self.router = transport.socket(self._ctx, zmq.ROUTER, curve=transport.curve_keys(key), server=True)
        guard_listener(self.router, limits.hello_within_s)
        try:
            self.address = transport.bind(self.router, host, port)
        except zmq.ZMQError:
            self.router.close(0)
            raise
        # every peer (a stage, a client) greets at once and on each heartbeat: a silent connection
        # is closed. A peer process that dies closes its connection at once: that is seen here
        # before any heartbeat is missed (heartbeats catch the hung ones)
        self.guard = ConnectionGuard(
            self.router, max_connections=limits.max_connections, hello_within_s=limits.hello_within_s
        )
        self._fds: dict[int, bytes] = {}  # connection -> the identity that last spoke on it
        self.epoch = secrets.token_hex(8)
        self.stages: dict[str, StageRecord] = {}
        self.clients: dict[bytes, ClientRecord] = {}
        self.requests: dict[str, TrackedRequest] = {}
        self._ended = Tombstones()
        self.stopping = threading.Event()
        self.counts = {s.value: 0 for s in RequestState if s is not RequestState.PENDING}
        self.counts.update(submitted=0, bad_messages=0, messages=0)
        self.snapshot: dict[str, Any] = {}
        self._snap_at = 0.0

    # ---- the loop

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.guard.monitor, zmq.POLLIN)
        next_check = 0.0
        try:
            while not self.stopping.is_set():
                ready = dict(poller.poll(max(10, int(self.heartbeat_s * 500))))
                if self.guard.monitor in ready:
                    self._disconnections()
                if self.router in ready:
                    self._drain()
                now = time.monotonic()
                if now >= next_check:
                    self._check(now)
                    next_check = now + self.heartbeat_s / 2
        finally:
            for record in self.stages.values():
                if record.alive:
                    self._send(record.identity, Shutdown("the coordinator stopped"))
            self.guard.close()
            self.router.close(0)
            self.relay.close()

    def stop(self) -> None:
        self.stopping.set()

    def _drain(self, limit: int = 512) -> None:
        for _ in range(limit):
            try:
                got = transport.receive(self.router, routed=True)
            except zmq.Again:
                return
            identity, message, frames = got.identity, got.message, got.frames
            if identity is not None and got.fd >= 0:
                self._fds[got.fd] = identity
                self.guard.heard(got.fd)
            self.counts["messages"] += 1
            if message is None or identity is None:
                self.counts["bad_messages"] += 1
            else:
                try:
                    self._handle(identity, message, frames)
                except Exception:  # one bad message must not stop the coordinator
                    log.exception("coordinator: failed to handle %s", type(message).__name__)
                    self.counts["bad_messages"] += 1
            if not transport.readable(self.router):
                return

    def _disconnections(self) -> None:
        for fd in self.guard.events():
            who = self._fds.pop(fd, None)
            if who is None:
                continue
            for name, record in self.stages.items():
                if record.alive and record.identity == who:
                    self._lose(name, "its connection closed")
            if who in self.clients:
                del self.clients[who]
                for request in [r for r in self.requests.values() if r.client == who]:
                    self._abort(request.request_id, "client gone")

    def _handle(self, who: bytes, message: Message, frames: Sequence[Any]) -> None:
        now = time.monotonic()
        if isinstance(message, Register):
            self._register(who, message, now)
        elif isinstance(message, Hello):
            self.clients[who] = ClientRecord(message.client, message.host, now)
            self._send(who, Welcome(self.epoch, self.directory(), self.spec.name))
        elif isinstance(message, Submit):
            self._submit(who, message, frames, now)
        elif isinstance(message, StreamChunk | StreamDone):
            self._stream(who, message, frames)
        elif isinstance(message, Abort):
            self._abort(message.request_id, message.reason)
        elif isinstance(message, RequestResult):
            self._result(message, frames)
        elif isinstance(message, Failed):
            request = self.requests.get(message.request_id)
            if request is not None:
                self._fail(request, message.code, message.message, source=message.source)
        else:
            self.counts["bad_messages"] += 1
            self.relay.discard(getattr(message, "payload", None))

    # ---- stages

    def directory(self) -> dict[str, StageInfo]:
        return {name: r.info for name, r in self.stages.items() if r.alive}

    def _register(self, who: bytes, message: Register, now: float) -> None:
        name = message.stage.name
        if name not in self.spec.names:
            log.warning("a stage %r that pipeline %s does not have tried to register", name, self.spec.name)
            self.counts["bad_messages"] += 1
            return
        record = self.stages.get(name)
        known = record is not None and record.alive and record.identity == who
        if record is not None and record.alive and record.identity != who:
            self._lose(name, "restarted")  # a new process took the name: the old one is gone
        if known and record is not None:
            record.last_seen, record.load, record.info = now, dict(message.load), message.stage
        else:
            lost = record.lost if record is not None else 0
            regs = record.registrations + 1 if record is not None else 1
            self.stages[name] = StageRecord(message.stage, who, now, dict(message.load), True, regs, lost)
            log.info("stage %s registered at %s (pid %d)", name, message.stage.address, message.stage.pid)
        self._send(who, RegisterAck(self.epoch, known))
        if not known:
            self._announce()
            for request in [r for r in self.requests.values() if r.state is RequestState.PENDING]:
                self._dispatch(request)

    def _announce(self) -> None:
        directory = Directory(self.epoch, self.directory())
        for record in self.stages.values():
            if record.alive:
                self._send(record.identity, directory)
        for who in list(self.clients):
            self._send(who, directory)

    def _lose(self, name: str, why: str) -> None:
        record = self.stages[name]
        record.alive = False
        record.lost += 1
        log.warning("stage %s lost (%s)", name, why)
        for request in [r for r in self.requests.values() if name in r.stages]:
            if request.state is RequestState.RUNNING:
                self._fail(request, StageLost.code, f"stage {name} was lost ({why})", source=name)
        self._announce()

    def _check(self, now: float) -> None:
        self.guard.sweep(now)
        for name, record in self.stages.items():
            if record.alive and now - record.last_seen > self.lost_after_s:
                self._lose(name, f"no heartbeat for {now - record.last_seen:.1f} s")
        for who, client in list(self.clients.items()):
            if now - client.last_seen > self.client_lost_after_s:
                del self.clients[who]
                for request in [r for r in self.requests.values() if r.client == who]:
                    self._abort(request.request_id, "client lost")
        for request in [r for r in self.requests.values() if r.state is RequestState.PENDING]:
            if now - request.created > self.request_wait_s:
                missing = sorted(s for s in request.stages if not self.alive(s))
                self._fail(request, StageUnavailable.code, f"stages {missing} are not available")
        if now - self._snap_at >= 0.5:
            self.snapshot = self.status(now)
            self._snap_at = now

    def alive(self, name: str) -> bool:
        record = self.stages.get(name)
        return record is not None and record.alive

    # ---- requests

    def _submit(self, who: bytes, message: Submit, frames: Sequence[Any], now: float) -> None:
        rid = message.request_id
        if rid in self.requests or rid in self._ended:
            self.relay.discard(message.payload)
            return
        client = self.clients.get(who)
        try:
            plan = self.spec.plan(
                message.entries or None, message.exits or None, client.host if client else ""
            )
        except OmnivoxError as err:
            self.relay.discard(message.payload)
            self._send(who, Failed(rid, err.code, err.message))
            return
        self.counts["submitted"] += 1
        attributes = {"omnivox.request_id": rid, "omnivox.exits": ",".join(plan.exits)}
        span = child_span("pipeline.request", message.traceparent, attributes)
        if span is not None:
            plan = msgspec.structs.replace(plan, traceparent=traceparent_of(span))
        request = TrackedRequest(rid, who, plan, message.payload, list(frames), now, span=span)
        self.requests[rid] = request
        self._dispatch(request)

    def _dispatch(self, request: TrackedRequest) -> None:
        if not all(self.alive(s) for s in request.stages):
            return  # PENDING until they register (or request_wait_s passes)
        plan = request.plan
        try:
            if len(plan.entries) == 1:
                sends = [(plan.entries[0], request.payload, request.frames)]
            else:  # each entry reads its own copy (a segment is read once)
                values = self.relay.unpack(request.payload, request.frames)
                sends = []
                for entry in plan.entries:
                    same = self.stages[entry].info.host == self.stages[plan.entries[0]].info.host
                    payload, frames = self.relay.pack(values, same_host=same)
                    sends.append((entry, payload, frames))
            request.payload, request.frames = Payload(), []
            request.machine.move(RequestState.RUNNING)
            for entry, payload, frames in sends:
                self._to_stage(entry, Submit(request.request_id, payload, plan), frames)
            for early, frames in request.early:
                self._stream(request.client, early, frames)
            request.early.clear()
        except OmnivoxError as err:
            self._fail(request, err.code, err.message)

    def _stream(self, who: bytes, message: StreamChunk | StreamDone, frames: Sequence[Any]) -> None:
        request = self.requests.get(message.request_id)
        if request is None or (message.source == CLIENT) != (who == request.client):
            self.relay.discard(message.payload)
            return
        if message.source != CLIENT:  # a stage's chunk for the client
            if isinstance(message, StreamChunk):
                self._send(request.client, message, frames)
            return
        if request.state is RequestState.PENDING:
            request.early.append((message, list(frames)))
            return
        forwarded = (
            StreamChunk(message.request_id, CLIENT, message.payload, request.plan, message.seq)
            if isinstance(message, StreamChunk)
            else StreamDone(message.request_id, CLIENT, request.plan, message.payload)
        )
        try:
            self._to_stage(request.plan.entries[0], forwarded, frames)
        except OmnivoxError as err:
            self._fail(request, err.code, err.message)

    def _result(self, message: RequestResult, frames: Sequence[Any]) -> None:
        request = self.requests.get(message.request_id)
        if request is None or message.source not in request.plan.exits:
            self.relay.discard(message.payload)
            return
        request.parts[message.source] = (message.payload, list(frames))
        if request.complete:
            parts, merged = request.merged()
            request.parts.clear()  # the client reads them now
            self._end(request, RequestState.COMPLETED)
            self._send(request.client, RequestResult(request.request_id, "", parts=parts), merged)

    def _abort(self, request_id: str, reason: str) -> None:
        request = self.requests.get(request_id)
        if request is None:
            return  # unknown or already ended: nothing to do
        self._end(request, RequestState.ABORTED)
        self._tell_stages(request, reason)

    def _fail(self, request: TrackedRequest, code: str, text: str, source: str = "") -> None:
        self._end(request, RequestState.FAILED)
        self._send(request.client, Failed(request.request_id, code, text, source))
        self._tell_stages(request, code)

    def _end(self, request: TrackedRequest, state: RequestState) -> None:
        request.machine.move(state)
        self.counts[state.value] += 1
        if request.span is not None:
            request.span.set_attribute("omnivox.state", state.value)
            request.span.end()
        self.requests.pop(request.request_id, None)
        self._ended.add(request.request_id)
        self.relay.discard(request.payload)
        for early, _ in request.early:
            self.relay.discard(early.payload)
        for payload, _ in request.parts.values():
            self.relay.discard(payload)

    def _tell_stages(self, request: TrackedRequest, reason: str) -> None:
        for name in request.stages:
            record = self.stages.get(name)
            if record is not None and record.alive:
                self._send(record.identity, Abort(request.request_id, reason))

    # ---- sending

    def _to_stage(self, name: str, message: Message, frames: Sequence[Any] = ()) -> None:
        record = self.stages.get(name)
        if record is None or not record.alive:
            raise StageUnavailable(f"stage {name} is not registered", stage=name)
        try:
            transport.send(self.router, message, frames, to=record.identity)
        except OmnivoxError:
            raise StageLost(f"stage {name} cannot be reached", stage=name) from None

    def _send(self, who: bytes, message: Message, frames: Sequence[Any] = ()) -> None:
        try:
            transport.send(self.router, message, frames, to=who)
        except OmnivoxError as err:
            log.debug("could not send %s: %s", type(message).__name__, as_omnivox_error(err).message)
            self.relay.discard(getattr(message, "payload", None))
            for part in getattr(message, "parts", {}).values():
                self.relay.discard(part)

    # ---- views

    def status(self, now: float | None = None) -> dict[str, Any]:
        """What the gateway shows (``protocol.control.pipeline.PipelineReport``)."""
        return status_view(self, time.monotonic() if now is None else now)
