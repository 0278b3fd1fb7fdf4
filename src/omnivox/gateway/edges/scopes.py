"""The two scopes a client session is relayed in (``edges.client`` picks one per protocol).

- ``SessionEdge`` (realtime, duplex): one worker for the session's whole life, frames relayed
  unparsed; frames sent while waiting are held (up to the protocol's bound) and delivered in order.
- ``TurnEdge`` (streaming): each turn waits for a worker routed by the history it continues, then
  relays until the worker reports the turn over.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from omnivox.connection.inbox import Inbox
from omnivox.connection.relay import Inbound, Relay, RelayEnd
from omnivox.connection.runtime import Connection
from omnivox.connection.sockets import PeerGone, Socket
from omnivox.connection.taps import Direction, Frame, Taps
from omnivox.core.config import Settings
from omnivox.core.errors import (
    WS_SERVER_ERROR,
    OmnivoxError,
    QueuedInputDropped,
    SessionIdle,
    WorkerBusy,
    WorkerLost,
)
from omnivox.core.tracing import tracer
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.sessions import SessionRecord
from omnivox.gateway.edges.worker_link import CONNECT_FAILURES, WorkerRefused, connect_worker
from omnivox.gateway.scheduling.admission import ClientGone
from omnivox.gateway.scheduling.store import Assignment
from omnivox.protocol.control.internal import PauseReport, TurnEndReport, parse_internal
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.control.workers import assignment_params
from omnivox.protocol.spec import WireProtocol
from omnivox.recording.service import SessionRecorder

log = logging.getLogger(__name__)

_CLOSE_CODES = (1000, 1008, 1011)  # what a worker's close may be passed on as (else 1011)
# times a session goes back to its place when its assigned worker does not take it: past that the
# worker's refusal reaches the client (a bound, so a confused store can never loop a client forever)
MAX_REQUEUES = 3


@dataclass(frozen=True)
class ClientRequest:
    """What the edge keeps of the client's request."""

    session_id: str
    query: dict[str, str]
    worker_params: dict[str, str]  # what the worker must know of it (protocol.worker_params)
    # when the client can be served (a WebRTC call: once its media connects; False: it never will)
    ready: Callable[[], Awaitable[bool]] | None = None
    # the client is a call's bridge: it is sent every frame, and withholds from its caller itself
    bridge: bool = False


class _Edge:
    """What both scopes share: the inbox, admission, the worker link and the relay."""

    def __init__(
        self,
        conn: Connection,
        protocol: WireProtocol,
        ctx: GatewayContext,
        record: SessionRecord,
        request: ClientRequest,
        taps: Taps,
        recorder: SessionRecorder | None = None,
    ) -> None:
        self.conn = conn
        self.recorder = recorder
        self.protocol = protocol
        self.ctx = ctx
        self.settings: Settings = ctx.settings
        self.record = record
        self.session_id = request.session_id
        self.worker_params = request.worker_params
        self.ready = request.ready
        self.taps = taps
        self.inbox: Inbox[Inbound] = Inbox(self.settings.max_message_bytes * 2)
        self.task_type = protocol.task_type(request.session_id, request.query)
        # frames this client did not ask for (a call's bridge reads them all: it withholds them itself)
        self.withheld = None if request.bridge else protocol.withheld(request.query)
        self.ticket_id: str | None = None
        self.resume = request.query.get("resume")  # a place in the queue it held before a drop

    def notify(self, notice: QueueNotice) -> None:
        frame = self.protocol.notice_frame(notice)
        if frame is not None and (self.withheld is None or not self.withheld(frame)):
            self.conn.send(frame)

    async def admit(self, history_hash: str | None = None) -> tuple[Assignment, Socket]:
        """A worker for the session (or turn), its connection open. A worker that does not take the
        session (it refuses it at the handshake: a stale assignment, or busy; or it cannot be
        reached) sends the client back to its place in the queue for the next one, up to
        ``MAX_REQUEUES`` times. Raises ClientGone or an OmnivoxError (no worker is held then)."""
        with tracer().start_as_current_span(
            "queue", attributes={"omnivox.task_type": self.task_type}
        ) as span:
            worker, ticket = await self.ctx.admission.acquire(
                self.task_type,
                self.conn.gone,
                self.notify,
                history_hash=history_hash,
                record=self.record,
                max_wait_s=self.protocol.max_wait_s(self.settings),
                resume=self.resume,
            )
            self.resume = None  # (a streaming session's later turns queue anew)
            span.set_attributes({"omnivox.worker_id": worker.worker_id, "omnivox.engine": worker.engine})
        for requeued in itertools.count(1):
            self.ticket_id = ticket.ticket_id
            if self.recorder is not None:
                self.recorder.assigned(worker.worker_id, worker.engine)
            try:
                return worker, await self.open(worker)
            except WorkerRefused as refused:
                if requeued > MAX_REQUEUES:
                    await self.release(worker, confirmed=False)
                    self.record.idle()
                    raise WorkerBusy(f"worker {worker.worker_id} refused the session: {refused}") from None
                log.info(
                    "worker %s refused %s (%s): back to its place",
                    worker.worker_id,
                    ticket.ticket_id,
                    refused.code,
                )
                lost = False
            except CONNECT_FAILURES as exc:
                if requeued > MAX_REQUEUES:
                    self.record.idle()
                    raise await self.lost(worker, exc) from None
                log.warning(
                    "worker %s unreachable (%s): %s back to its place",
                    worker.worker_id,
                    exc,
                    ticket.ticket_id,
                )
                lost = True
            except BaseException:
                # cancelled while connecting (its client left) or a fault: the worker may have
                # begun the session; it is handed out again once it says it is free
                await self.release(worker, confirmed=False)
                self.record.idle()
                raise
            with tracer().start_as_current_span(
                "queue", attributes={"omnivox.task_type": self.task_type, "omnivox.requeued": requeued}
            ) as span:
                worker, ticket = await self.ctx.admission.requeue(
                    ticket,
                    worker,
                    self.conn.gone,
                    self.notify,
                    record=self.record,
                    max_wait_s=self.protocol.max_wait_s(self.settings),
                    lost=lost,
                )
                span.set_attributes({"omnivox.worker_id": worker.worker_id, "omnivox.engine": worker.engine})
        raise AssertionError("unreachable")  # (itertools.count never ends)

    async def release(self, worker: Assignment, *, confirmed: bool = True, **cache: str | None) -> None:
        """End this session's assignment of ``worker`` (never a later one's). Unconfirmed (the
        worker did not say it was done): it is handed out again once it says it is free."""
        await self.ctx.store.release(worker, confirmed=confirmed, **cache)
        if not confirmed:
            self.ctx.health.confirm(worker.worker_id, worker.url)

    async def open(self, worker: Assignment) -> Socket:
        # the ticket and its fencing epoch: the worker refuses an assignment older than one it saw
        params = {**self.worker_params, **assignment_params(worker.worker_id, worker.ticket_id, worker.epoch)}
        url = self.protocol.worker_url(worker.url, self.session_id, params)
        return await connect_worker(url, self.settings)

    def relay(self, socket: Socket, control: Callable[[str], bool] = lambda frame: False) -> Relay:
        return Relay(
            self.inbox, self.conn, socket, see=self.taps.see, control=control, withheld=self.withheld
        )

    async def lost(self, worker: Assignment, why: object) -> WorkerLost:
        log.warning("worker %s lost mid-%s: %s", worker.worker_id, self.protocol.scope, why)
        await self.ctx.store.worker_lost(worker)
        return WorkerLost(f"worker {worker.worker_id} was lost; " + self._after_loss)

    _after_loss = "start a new session"


class SessionEdge(_Edge):
    """One worker for the session's whole life; frames relayed unparsed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connected = False
        self.dropped = 0
        self.held = 0  # bytes held for it while it waits, counted in the gateway's total
        self.heard_at = time.monotonic()  # the client's last frame

    async def on_frame(self, raw: str | bytes) -> None:
        self.heard_at = time.monotonic()
        item = Inbound(raw)
        if self.connected:
            await self.inbox.put(item, item.size)
            return
        limit = self.protocol.held_bytes(self.settings)
        total = self.ctx.held_bytes
        if total.take(item.size):
            if self.inbox.offer(item, item.size, budget=limit):
                self.held += item.size
                return
            total.give(item.size)
        self.dropped += 1
        if self.dropped == 1:  # said once; the session starts without what was dropped
            raise QueuedInputDropped(
                f"more than {limit} bytes of events arrived while waiting for a worker (or the "
                "gateway holds all it may for waiting sessions); later ones are dropped until "
                "the session starts"
            )

    async def main(self) -> None:
        try:
            await self._serve()
        finally:
            self._release_held()

    def _release_held(self) -> None:
        """What was held for it is relayed now (or never will be): out of the gateway's total."""
        self.ctx.held_bytes.give(self.held)
        self.held = 0

    async def _serve(self) -> None:
        if self.ready is not None and not await self.ready():
            return  # gone before it could be served (a call whose media never connected): no worker
        try:
            worker, socket = await self.admit()
        except ClientGone:
            return
        except OmnivoxError as err:
            refusal = self.protocol.refusal(err)
            self.conn.error(refusal)
            self.conn.end(refusal.close_code)
            return
        end: RelayEnd | None = None
        failure: object = None
        try:
            try:
                self.connected = True
                self._release_held()
                self.heard_at = time.monotonic()
                await self.conn.units.start("idle", self._watch_idle())
                end = await self.relay(socket, lambda frame: self._control(worker, frame)).run()
            finally:
                await socket.close()
        except CONNECT_FAILURES as exc:
            failure = exc
        finally:
            if failure is None and end is not None and end.worker_dropped:
                failure = "its connection dropped"
            if failure is not None:
                self.conn.error(await self.lost(worker, failure))
                self.conn.end(WS_SERVER_ERROR)
            # no-op once marked offline; when the client went first, the worker is still winding down
            await self.release(worker, confirmed=end is not None and end.side == "worker")
            self.record.idle()
        if end is not None and end.side == "worker":  # the worker ended the session: so does the client
            code = end.worker_code or 1000
            self.conn.end(code if code in _CLOSE_CODES else WS_SERVER_ERROR)

    async def _watch_idle(self) -> None:
        """A session holds a worker: one whose client says nothing for too long gives it back (a
        paused duplex session is not idle: its own pause timeout watches it)."""
        limit = self.settings.session_idle_limit_s
        while True:
            await asyncio.sleep(min(1.0, limit / 4))
            now = time.monotonic()
            if self.record.paused:
                self.heard_at = now
            elif now - self.heard_at > limit:
                self.conn.error(SessionIdle(f"nothing was heard from the client for {limit:g} s"))
                return

    def _control(self, worker: Assignment, frame: str) -> bool:
        """The worker's state changed within the session (a duplex pause): the store follows."""
        report = parse_internal(frame)
        if isinstance(report, PauseReport):
            self.ctx.store.note_paused(worker, report.paused)
            self.record.paused = report.paused
        return False


class TurnEdge(_Edge):
    """A worker per turn, routed by the history the turn continues; messages parsed here."""

    _after_loss = "send the turn again"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turn_end: TurnEndReport | None = None

    async def on_frame(self, raw: str | bytes) -> None:
        msg = self.protocol.parser(raw, self.settings.max_message_bytes)
        if self.protocol.ends_session(msg):
            self.inbox.close()
            self.conn.end()
            return
        item = Inbound(raw, msg)
        await self.inbox.put(item, item.size)

    async def main(self) -> None:
        while (item := await self.inbox.get()) is not None:
            start = self.protocol.turn_start(item.msg)
            if start is None:
                if (err := self.protocol.between_turns(item.msg)) is not None:
                    self.conn.error(err)
                continue
            try:
                worker, socket = await self.admit(start.history_hash)
            except ClientGone:
                return
            except OmnivoxError as err:
                self.conn.error(self.protocol.refusal(err))
                if err.fatal:
                    return
                continue
            await self.turn(worker, socket, item)

    async def turn(self, worker: Assignment, socket: Socket, opening: Inbound) -> None:
        self._turn_end = None
        end: RelayEnd | None = None
        failure: object = None
        try:
            try:
                # the turn's opening message goes to the worker outside the relay: taps see it here
                self.taps.see(Frame(Direction.TO_WORKER, time.monotonic(), opening.raw))
                with contextlib.suppress(PeerGone):
                    # the worker refused the session at once (a stale assignment): it said why
                    # before it closed, and the relay passes that on
                    await socket.send(opening.raw)
                end = await self.relay(socket, self._control).run()
            finally:
                await socket.close()
        except CONNECT_FAILURES as exc:
            failure = exc
        finally:
            if failure is None and end is not None and end.worker_dropped and not end.held:
                failure = "its connection dropped"
            if failure is not None:
                self.conn.error(await self.lost(worker, failure))  # marked offline: nothing to release
            elif self._turn_end is not None:
                await self.release(worker, cached_hash=self._turn_end.cached_hash)
            else:
                # the turn did not end (its client left mid-turn): the worker is interrupted and
                # winds down; it takes the next turn once it says it is free (the cache is kept)
                await self.release(worker, confirmed=False)
            self.record.idle()

    def _control(self, frame: str) -> bool:
        report = parse_internal(frame)
        if isinstance(report, TurnEndReport):
            self._turn_end = report
            return True
        return False
