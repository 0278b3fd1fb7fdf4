"""A stage: the IO shell around one scheduler. It owns no model logic.

It receives control messages (from the coordinator on its DEALER socket, from upstream stages on its
PULL socket), reads their payloads through the relay, waits for every input of a fan-in stage, and
puts the work into ``scheduler.inbox``. It drains ``scheduler.outbox`` and routes each output by the
request's plan: stream chunks to the plan's stream targets, the result to the next stages (as
``DataReady``, or ``StreamDone`` where it streamed) or to the coordinator for the client, errors to
the coordinator. It never asks what kind of scheduler it has.

It registers with the coordinator and re-registers as its heartbeat; an acknowledgement saying the
coordinator did not count it as alive (it restarted, or wrote this stage off while it was stalled)
means its requests in flight were failed, so it aborts them all.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import zmq

from omnivox.core.errors import OmnivoxError, StageUnavailable, as_omnivox_error
from omnivox.core.tracing import child_span
from omnivox.pipeline import transport
from omnivox.pipeline.connections import ConnectionGuard, ConnectionLimits, guard_listener
from omnivox.pipeline.messages import (
    CLIENT,
    Abort,
    DataReady,
    Directory,
    Failed,
    Message,
    Payload,
    Plan,
    Register,
    RegisterAck,
    RequestResult,
    Shutdown,
    StageInfo,
    StreamChunk,
    StreamDone,
    Submit,
)
from omnivox.pipeline.relay import PayloadRelay, host_id
from omnivox.pipeline.scheduler import IncomingMessage, IncomingType, OutgoingMessage, Scheduler, Tombstones

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 5.0


@dataclass
class _Request:
    plan: Plan
    started: bool = False  # new_request went to the scheduler
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # fan-in: source -> values
    streamed: set[str] = field(default_factory=set)  # targets that got stream chunks from here
    seq: int = 0
    span: Any = None  # its trace span here (None: not traced), ended when it leaves this stage

    def leave(self, outcome: str) -> None:
        if self.span is not None:
            self.span.set_attribute("omnivox.outcome", outcome)
            self.span.end()


class Stage:
    def __init__(
        self,
        name: str,
        scheduler: Scheduler,
        coordinator: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        advertise: str | None = None,
        relay: PayloadRelay | None = None,
        heartbeat_s: float = 0.2,
        context: zmq.Context[Any] | None = None,
        key: str | None = None,
        connections: ConnectionLimits | None = None,
    ) -> None:
        """``key``: the worker key; with one, every socket of the stage speaks CurveZMQ.
        ``connections``: what its port holds (surplus connections are closed)."""
        self.name = name
        self.scheduler = scheduler
        self.relay = relay or PayloadRelay()
        self.heartbeat_s = heartbeat_s
        self._ctx = context or zmq.Context.instance()
        self._curve = transport.curve_keys(key)
        limits = connections or ConnectionLimits()
        self.pull = transport.socket(self._ctx, zmq.PULL, curve=self._curve, server=True)
        guard_listener(self.pull, limits.hello_within_s)
        address = transport.bind(self.pull, host, port)
        # peers push only when they have work: silence is no fault here, only the cap applies
        self.guard = ConnectionGuard(self.pull, max_connections=limits.max_connections, hello_within_s=None)
        if advertise:
            address = f"tcp://{advertise}:{address.rsplit(':', 1)[1]}"
        self.address = address
        ident = f"stage:{name}:{os.getpid()}:{id(self):x}".encode()
        self.dealer = transport.socket(self._ctx, zmq.DEALER, identity=ident, curve=self._curve)
        self.dealer.connect(coordinator)
        self._pushes: dict[str, zmq.Socket[Any]] = {}
        self.directory: dict[str, StageInfo] = {}
        self.requests: dict[str, _Request] = {}
        self._aborted = Tombstones()
        self.epoch: str | None = None
        self.registered = False
        self.stopping = threading.Event()
        self.bad_messages = 0
        self.aborts = 0  # requests in flight here that an Abort stopped
        self.sent = 0
        self.received = 0

    @property
    def info(self) -> StageInfo:
        return StageInfo(self.name, self.address, host_id(), os.getpid(), dict(self.scheduler.info))

    # ---- the loop

    def run(self) -> None:
        """Serve until ``stop()`` or a ``Shutdown``; the scheduler is started and stopped here."""
        self.scheduler.start()
        poller = zmq.Poller()
        poller.register(self.pull, zmq.POLLIN)
        poller.register(self.dealer, zmq.POLLIN)
        poller.register(self.guard.monitor, zmq.POLLIN)
        poller.register(self.scheduler.outbox.fileno(), zmq.POLLIN)
        self._register(first=True)
        next_beat = time.monotonic() + self.heartbeat_s
        next_sweep = time.monotonic() + SWEEP_EVERY_S
        try:
            while not self.stopping.is_set():
                wait_ms = max(0, int((next_beat - time.monotonic()) * 1000))
                ready = dict(poller.poll(min(wait_ms, 100)))
                if self.guard.monitor in ready:
                    self.guard.events()
                if self.pull in ready:
                    self._drain(self.pull)
                if self.dealer in ready:
                    self._drain(self.dealer)
                self._route(self.scheduler.outbox.drain())
                now = time.monotonic()
                if now >= next_beat:
                    self._register()
                    next_beat = now + self.heartbeat_s
                if now >= next_sweep:
                    self.relay.sweep()
                    next_sweep = now + SWEEP_EVERY_S
        finally:
            self.scheduler.stop()
            self._close()

    def stop(self) -> None:
        self.stopping.set()

    def _close(self) -> None:
        self.guard.close()
        for sock in [self.pull, self.dealer, *self._pushes.values()]:
            sock.close(0)
        self.scheduler.outbox.close()
        self.relay.close()

    def _drain(self, sock: zmq.Socket[Any], limit: int = 256) -> None:
        for _ in range(limit):
            try:
                got = transport.receive(sock)
            except zmq.Again:
                return
            message, frames = got.message, got.frames
            if sock is self.pull and got.fd >= 0:
                self.guard.heard(got.fd)
            if message is None:
                self.bad_messages += 1
            else:
                self.received += 1
                try:
                    self._handle(message, frames)
                except Exception:  # one bad message must not stop the stage
                    log.exception("stage %s: failed to handle %s", self.name, type(message).__name__)
                    self.bad_messages += 1
            if not transport.readable(sock):
                return

    # ---- incoming

    def _handle(self, message: Message, frames: Sequence[Any]) -> None:
        if isinstance(message, Submit | DataReady | StreamChunk | StreamDone):
            self._take(message, frames)
        elif isinstance(message, Abort):
            self.aborts += message.request_id in self.requests  # in flight here (else: harmless)
            self._abort(message.request_id)
        elif isinstance(message, RegisterAck):
            self._acknowledged(message)
        elif isinstance(message, Directory):
            self.directory = dict(message.stages)
            live = {peer.address for peer in self.directory.values()}
            for address in [a for a in self._pushes if a not in live]:
                self._pushes.pop(address).close(0)  # a stage that moved (restarted elsewhere)
        elif isinstance(message, Shutdown):
            log.info("stage %s: shutdown (%s)", self.name, message.reason or "asked")
            self.stopping.set()
        else:
            self.bad_messages += 1  # a message no stage takes (a client's, a result)
            self.relay.discard(getattr(message, "payload", None))

    def _take(self, message: Submit | DataReady | StreamChunk | StreamDone, frames: Sequence[Any]) -> None:
        rid = message.request_id
        if rid in self._aborted:
            self.relay.discard(message.payload)
            return
        try:
            values = self.relay.unpack(message.payload, frames)
        except OmnivoxError as err:
            self._fail(rid, err)
            return
        request = self.requests.get(rid)
        if request is None:
            plan = message.plan
            if plan is None or self.name not in plan.targets:
                self.bad_messages += 1
                return
            span = child_span(f"stage.{self.name}", plan.traceparent, {"omnivox.request_id": rid})
            request = self.requests[rid] = _Request(plan, span=span)
        inbox = self.scheduler.inbox
        if isinstance(message, Submit):
            request.started = True
            inbox.put(IncomingMessage(rid, "new_request", values))
        elif isinstance(message, DataReady):
            expected = request.plan.inputs.get(self.name, [])
            if len(expected) <= 1:
                request.started = True
                inbox.put(IncomingMessage(rid, "new_request", values))
                return
            request.inputs[message.source] = values
            if all(src in request.inputs for src in expected):
                request.started = True
                # in the plan's order, whichever input came first (a model may read them in order)
                inputs = {src: request.inputs[src] for src in expected}
                inbox.put(IncomingMessage(rid, "new_request", inputs))
                request.inputs.clear()
        else:
            if not request.started:
                request.started = True
                inbox.put(IncomingMessage(rid, "new_request", {"streaming": True}))
            kind: IncomingType = "stream_chunk" if isinstance(message, StreamChunk) else "stream_done"
            inbox.put(IncomingMessage(rid, kind, values))

    def _abort(self, request_id: str) -> None:
        self._aborted.add(request_id)
        if (request := self.requests.pop(request_id, None)) is not None:
            request.leave("aborted")
        self.scheduler.abort(request_id)

    def _acknowledged(self, ack: RegisterAck) -> None:
        if self.registered and (not ack.known or ack.epoch != self.epoch) and self.requests:
            log.warning(
                "stage %s: the coordinator wrote off %d requests in flight", self.name, len(self.requests)
            )
            for rid in list(self.requests):
                self._abort(rid)
        self.epoch = ack.epoch
        self.registered = True

    # ---- outgoing

    def _route(self, outputs: list[OutgoingMessage]) -> None:
        for out in outputs:
            request = self.requests.get(out.request_id)
            if request is None:
                continue  # aborted meanwhile
            try:
                if out.type == "error":
                    self.requests.pop(out.request_id, None)
                    request.leave("error")
                    code, text = str(out.data.get("code", "pipeline_error")), str(out.data.get("message", ""))
                    self._to_coordinator(Failed(out.request_id, code, text, self.name))
                elif out.type == "stream":
                    self._stream(out, request)
                else:
                    self.requests.pop(out.request_id, None)
                    request.leave("done")
                    self._result(out, request)
            except Exception as err:  # anything a model put out that cannot travel fails its request
                self._fail(out.request_id, err)

    def _stream(self, out: OutgoingMessage, request: _Request) -> None:
        for target in request.plan.streams.get(self.name, []):
            payload, frames = self._pack(out.data, target, request.plan)
            chunk = StreamChunk(out.request_id, self.name, payload, request.plan, request.seq)
            self._send(target, chunk, frames)
            request.streamed.add(target)
        request.seq += 1

    def _result(self, out: OutgoingMessage, request: _Request) -> None:
        rid, plan = out.request_id, request.plan
        for target in plan.targets.get(self.name, []):
            payload, frames = self._pack(out.data, target, plan)
            if target == CLIENT:
                self._send(target, RequestResult(rid, self.name, payload), frames)
            elif target in request.streamed:
                self._send(target, StreamDone(rid, self.name, plan, payload), frames)
            else:
                self._send(target, DataReady(rid, self.name, plan, payload), frames)

    def _pack(self, values: dict[str, Any], target: str, plan: Plan) -> tuple[Payload, list[Any]]:
        if target == CLIENT:
            return self.relay.pack(values, same_host=plan.client_host == host_id())
        peer = self.directory.get(target)
        return self.relay.pack(values, same_host=peer is not None and peer.host == host_id())

    def _send(self, target: str, message: Message, frames: Sequence[Any]) -> None:
        try:
            if target == CLIENT:
                transport.send(self.dealer, message, frames)
            else:
                transport.send(self._push(target), message, frames)
        except OmnivoxError:
            self.relay.discard(getattr(message, "payload", None))
            raise
        self.sent += 1

    def _push(self, target: str) -> zmq.Socket[Any]:
        peer = self.directory.get(target)
        if peer is None:
            raise StageUnavailable(f"stage {target} is not registered", stage=target)
        sock = self._pushes.get(peer.address)
        if sock is None:
            sock = self._pushes[peer.address] = transport.socket(self._ctx, zmq.PUSH, curve=self._curve)
            sock.connect(peer.address)
        return sock

    def _fail(self, request_id: str, err: BaseException) -> None:
        error = as_omnivox_error(err)
        self._abort(request_id)
        self._to_coordinator(Failed(request_id, error.code, error.message, self.name))

    def _to_coordinator(self, message: Message) -> None:
        try:
            transport.send(self.dealer, message)
            self.sent += 1
        except OmnivoxError:
            pass  # the coordinator is away: it fails the request itself

    def _register(self, first: bool = False) -> None:
        load = {
            **self.scheduler.load(),
            "bad_messages": float(self.bad_messages),
            "aborted": float(self.aborts),
            "relay_segments": float(self.relay.segments_created),
            "requests": float(len(self.requests)),
        }
        self._to_coordinator(Register(self.info, load, first))
