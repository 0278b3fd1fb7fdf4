"""Gateway side of ``WS /v1/realtime``: auth, admission through the pool, then a relay to a worker.

The session itself (turn-taking, ASR, LLM, TTS) runs on the worker assigned to it for its whole life;
the gateway only checks the token, waits for a worker (telling the client its place with
``omnivox.queue`` events, up to ``realtime_max_wait_s``), and then copies frames both ways without
parsing them, so it stays light and capacity grows with workers. Frames a client sends while queued
are held (up to ``realtime_queued_bytes``) and delivered in order once a worker is there.

Refusals close with 1008 after an ``error`` event: a missing or wrong token (``unauthorized``), a full
queue or a wait that ran out (``session_limit_reached``). A worker lost mid-session gives
``worker_lost`` and close 1011; the pool marks it OFFLINE and the queue keeps moving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

import websockets
from fastapi import WebSocket, WebSocketDisconnect
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidHandshake

from omnivox.core.errors import (
    WS_POLICY,
    OmnivoxError,
    QueuedInputDropped,
    QueueFull,
    SessionLimitReached,
    TicketCancelled,
    Unauthorized,
    WorkerLost,
)
from omnivox.core.ids import new_id
from omnivox.gateway.admission import ClientGone, NoticeKind, QueueNotice
from omnivox.gateway.context import GatewayContext, ws_url
from omnivox.gateway.pool import WorkerRecord
from omnivox.gateway.sessions import SessionRecord
from omnivox.protocol import realtime as rt
from omnivox.protocol.wire import frames

log = logging.getLogger(__name__)

_WORKER_FAILURES = (OSError, ConnectionClosed, InvalidHandshake, TimeoutError)
INSECURE_KEY = "openai-insecure-api-key."  # how browsers pass a key (they cannot set headers)


def offered_key(ws: WebSocket) -> str | None:
    auth = ws.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for proto in ws.scope.get("subprotocols", []):
        if proto.startswith(INSECURE_KEY):
            return proto[len(INSECURE_KEY) :]
    return ws.query_params.get("api_key")


def chosen_subprotocol(ws: WebSocket) -> str | None:
    """``realtime`` when offered; else one the client offered (browsers fail a handshake that
    answers none of the subprotocols they asked for)."""
    offered = list(ws.scope.get("subprotocols", []))
    if "realtime" in offered:
        return "realtime"
    return offered[0] if offered else None


async def serve_realtime(ws: WebSocket, ctx: GatewayContext) -> None:
    await ws.accept(subprotocol=chosen_subprotocol(ws))
    relay = RealtimeRelay(ws, ctx)
    key = ctx.settings.api_key
    if key and offered_key(ws) != key:
        await relay.refuse(Unauthorized("a valid API key is required (Authorization: Bearer <key>)"))
        return
    metrics = ctx.metrics
    metrics.sessions.labels("realtime").inc()
    active = metrics.active_sessions.labels("realtime")
    active.inc()
    try:
        with ctx.sessions.track("realtime", ws.query_params.get("session_id") or new_id("rt")) as record:
            await relay.run(record)
    finally:
        active.dec()


class RealtimeRelay:
    def __init__(self, ws: WebSocket, ctx: GatewayContext) -> None:
        self.ws = ws
        self.ctx = ctx
        self.beta = "realtime=v1" in ws.headers.get("openai-beta", "")
        self.gone = asyncio.Event()
        self._held: deque[str | bytes] = deque()
        self._held_bytes = 0
        self._dropped = 0
        self._worker_ws: Any = None
        self._queued = False
        self._notices: asyncio.Queue[str] = asyncio.Queue()

    async def refuse(self, err: OmnivoxError) -> None:
        self.ctx.metrics.error(err.wire_code)
        with contextlib.suppress(Exception):
            await self.ws.send_text(rt.error_event(err).model_dump_json())
            await self.ws.close(err.close_code)

    def notify(self, kind: NoticeKind, notice: QueueNotice) -> None:
        if kind == "queue_done" and not self._queued:
            return  # a worker was free at once: the client hears nothing of a queue
        self._queued = True
        status = "assigned" if kind == "queue_done" else "queued"
        event = rt.QueueStatus(
            status=status,
            ticket_id=notice.ticket_id,
            position=notice.position,
            queue_length=notice.queue_length,
            estimated_wait_s=notice.estimated_wait_s,
        )
        self._notices.put_nowait(event.model_dump_json())

    async def run(self, record: SessionRecord) -> None:
        tasks = [
            asyncio.create_task(self._read_client(), name="realtime-read"),
            asyncio.create_task(self._send_notices(), name="realtime-notices"),
        ]
        try:
            worker = await self._admit(record)
            if worker is not None:
                await self._notices.join()  # the client hears "assigned" before the session's events
                await self._serve(worker, record)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _admit(self, record: SessionRecord) -> WorkerRecord | None:
        ctx = self.ctx
        try:
            worker, _ = await ctx.admission.acquire(
                "realtime", self.gone, self.notify, record=record, max_wait_s=ctx.settings.realtime_max_wait_s
            )
        except ClientGone:
            return None
        except (QueueFull, TicketCancelled) as exc:
            await self.refuse(SessionLimitReached(f"the server is at capacity: {exc.message}"))
            return None
        except OmnivoxError as err:
            await self.refuse(err if err.close_code == WS_POLICY else SessionLimitReached(err.message))
            return None
        return worker

    async def _serve(self, worker: WorkerRecord, record: SessionRecord) -> None:
        ctx = self.ctx
        lost: BaseException | None = None
        try:
            url = ws_url(worker.url, "/ws/realtime" + ("?beta=1" if self.beta else ""))
            async with websockets.connect(
                url,
                max_size=ctx.settings.max_message_bytes * 2,
                open_timeout=ctx.settings.worker_connect_timeout_s,
                max_queue=None,
            ) as wws:
                while self._held:  # what the client said while it waited, in order, then live
                    await wws.send(self._held.popleft())
                self._worker_ws = wws
                if not self.gone.is_set():
                    lost = await self._pump_from_worker(wws, record)
        except _WORKER_FAILURES as exc:
            lost = exc
        finally:
            self._worker_ws = None
            if lost is not None and not self.gone.is_set():
                log.warning("worker %s lost mid realtime session: %s", worker.worker_id, lost)
                ctx.pool.mark_offline(worker)
                await self.refuse(WorkerLost(f"worker {worker.worker_id} was lost; start a new session"))
            ctx.pool.release(worker)  # no-op once marked offline
            record.idle()

    async def _pump_from_worker(self, wws: Any, record: SessionRecord) -> BaseException | None:
        """Copy the worker's events to the client until one side ends. Returns the failure if the
        worker's connection dropped (no close frame): the worker is gone, not just done."""
        try:
            async for frame in wws:
                if isinstance(frame, str) and frame.startswith(rt.INTERNAL_PREFIX):
                    self._observe(frame, record)
                elif isinstance(frame, str):
                    await self.ws.send_text(frame)
                else:
                    await self.ws.send_bytes(frame)
        except ConnectionClosedError as exc:
            if exc.rcvd is None:
                return exc
        except (WebSocketDisconnect, RuntimeError):
            self.gone.set()  # the client went while we were writing to it
            return None
        if not self.gone.is_set():  # the worker ended the session: so does the client's socket
            code = wws.close_code or 1000
            with contextlib.suppress(Exception):
                await self.ws.close(code if code in (1000, 1008, 1011) else 1011)
        return None

    def _observe(self, frame: str, record: SessionRecord) -> None:
        try:
            m = rt.InternalMetrics.model_validate_json(frame)
        except ValueError:
            return
        metrics = self.ctx.metrics
        if m.voice_to_voice_s is not None:
            metrics.voice_to_voice.observe(m.voice_to_voice_s)
        if m.llm_ttft_s is not None:
            metrics.llm_ttft.observe(m.llm_ttft_s)
        if m.tts_ttfa_s is not None:
            metrics.tts_ttfa.observe(m.tts_ttfa_s)
        if m.response_done:
            metrics.responses.inc()
            record.turns += 1
        if m.interrupted:
            metrics.interruptions.inc()
        if m.error_code is not None:
            metrics.error(m.error_code)
        for part, busy, audio in (("asr", m.asr_busy_s, m.asr_audio_s), ("tts", m.tts_busy_s, m.tts_audio_s)):
            if audio:
                metrics.voice_busy.labels(part).inc(busy)
                metrics.voice_audio.labels(part).inc(audio)

    async def _read_client(self) -> None:
        limit = self.ctx.settings.realtime_queued_bytes
        try:
            async for frame in frames(self.ws):
                wws = self._worker_ws
                if wws is not None:
                    try:
                        await wws.send(frame)
                    except ConnectionClosed:
                        break  # the pump sees why the worker's side ended
                elif self._held_bytes + len(frame) <= limit:
                    self._held.append(frame)
                    self._held_bytes += len(frame)
                else:
                    self._dropped += 1
                    if self._dropped == 1:  # said once; the session starts without what was dropped
                        err = QueuedInputDropped(
                            f"more than {limit} bytes of events arrived while waiting for a worker; "
                            "later ones are dropped until the session starts"
                        )
                        self.ctx.metrics.error(err.code)
                        self._notices.put_nowait(rt.error_event(err).model_dump_json())
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            self.gone.set()
            wws = self._worker_ws
            if wws is not None:
                with contextlib.suppress(Exception):
                    await wws.close()

    async def _send_notices(self) -> None:
        while True:
            payload = await self._notices.get()
            with contextlib.suppress(Exception):
                await self.ws.send_text(payload)
            self._notices.task_done()
