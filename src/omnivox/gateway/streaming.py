"""Gateway side of turn-based streaming (``WS /ws/streaming/{session_id}``).

Each turn (``prefill`` .. ``done``) takes a worker through the pool, routed by the hash of the
conversation before the last message. On a cache hit only the new message is forwarded and the
worker keeps its KV cache; on a miss everything is forwarded on a cleared cache. The gateway then
relays between client and worker; the worker is released with the hash of what its cache now holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from omnivox.core.errors import OmnivoxError, PrefillRequired, WorkerLost
from omnivox.gateway.admission import ClientGone, NoticeKind, QueueNotice
from omnivox.gateway.connection import DISCONNECTED, ClientConnection
from omnivox.gateway.context import GatewayContext, ws_url
from omnivox.gateway.pool import WorkerRecord
from omnivox.gateway.sessions import SessionRecord
from omnivox.protocol import streaming as sp
from omnivox.protocol.chat import history_hash
from omnivox.protocol.queue import Queued, QueueDone, QueueUpdate
from omnivox.protocol.wire import Msg

log = logging.getLogger(__name__)

_WORKER_FAILURES = (OSError, ConnectionClosed, InvalidHandshake, TimeoutError, json.JSONDecodeError)


class StreamingSession:
    def __init__(
        self, conn: ClientConnection, ctx: GatewayContext, session_id: str, record: SessionRecord
    ) -> None:
        self.conn = conn
        self.ctx = ctx
        self.session_id = session_id
        self.record = record

    async def run(self) -> None:
        while True:
            msg = await self.conn.next()
            if msg is DISCONNECTED or isinstance(msg, sp.Close):
                return
            if isinstance(msg, sp.Prefill):
                if not await self.turn(msg):
                    return
            elif isinstance(msg, sp.Generate):
                self.conn.error(PrefillRequired("send prefill before generate"))
            # a stop with nothing running has nothing to stop

    def notify(self, kind: NoticeKind, notice: QueueNotice) -> None:
        if kind == "queue_done":
            msg: Msg = QueueDone(
                ticket_id=notice.ticket_id, worker_id=notice.worker_id or "", waited_s=notice.waited_s
            )
        else:
            msg = (Queued if kind == "queued" else QueueUpdate)(
                ticket_id=notice.ticket_id,
                position=notice.position,
                queue_length=notice.queue_length,
                estimated_wait_s=notice.estimated_wait_s,
            )
        self.conn.send(msg.dump())

    async def turn(self, prefill: sp.Prefill) -> bool:
        """Serve one turn. False when the session is over (client gone, fatal error)."""
        ctx = self.ctx
        try:
            worker, ticket = await ctx.admission.acquire(
                "streaming",
                self.conn.gone,
                self.notify,
                history_hash=history_hash(prefill.messages[:-1]),
                record=self.record,
            )
        except ClientGone:
            return False
        except OmnivoxError as err:
            self.conn.error(err)
            return not err.fatal
        hit = ticket.cache_hit
        (ctx.metrics.cache_hits if hit else ctx.metrics.cache_misses).inc()
        forward = prefill.model_copy(
            update={"messages": prefill.messages[-1:] if hit else prefill.messages, "clear_kv_cache": not hit}
        )
        cached_hash: str | None = None
        try:
            async with websockets.connect(
                ws_url(worker.url, f"/ws/streaming/{self.session_id}"),
                max_size=ctx.settings.max_message_bytes * 2,
                open_timeout=ctx.settings.worker_connect_timeout_s,
            ) as wws:
                await wws.send(forward.model_dump_json(exclude_none=True))
                cached_hash, alive = await self.relay(wws, worker, hit)
                return alive
        except _WORKER_FAILURES as exc:
            log.warning("worker %s lost mid-turn: %s", worker.worker_id, exc)
            ctx.pool.mark_offline(worker)
            self.conn.error(WorkerLost(f"worker {worker.worker_id} was lost mid-turn; send the turn again"))
            return True
        finally:
            ctx.pool.release(worker, cached_hash=cached_hash)  # no-op if it was marked offline
            self.record.idle()

    async def relay(self, wws: Any, worker: WorkerRecord, hit: bool) -> tuple[str | None, bool]:
        """Pump both ways until ``done``. Returns (hash the worker's cache holds, session alive).

        A turn also ends when the worker refuses its prefill (an error before ``prefill_done``): the
        worker's cache is as it was, and the client's next prefill is routed afresh."""
        from_worker = asyncio.ensure_future(wws.recv())
        from_client = asyncio.ensure_future(self.conn.next())
        generate_at: float | None = None
        prefilled = False
        try:
            while True:
                done, _ = await asyncio.wait({from_worker, from_client}, return_when=asyncio.FIRST_COMPLETED)
                if from_client in done:
                    msg = from_client.result()
                    if msg is DISCONNECTED:
                        return None, False
                    if isinstance(msg, sp.Close):
                        return None, False
                    if isinstance(msg, sp.Prefill):  # a further chunk of this turn's input
                        msg = msg.model_copy(update={"clear_kv_cache": False})
                    elif isinstance(msg, sp.Generate) and generate_at is None:
                        generate_at = time.monotonic()
                    await wws.send(msg.model_dump_json(exclude_none=True))
                    from_client = asyncio.ensure_future(self.conn.next())
                if from_worker in done:
                    data = json.loads(from_worker.result())
                    kind = data.get("type")
                    if kind == "prefill_done":
                        prefilled = True
                        data.update(cache_hit=hit, worker_id=worker.worker_id)
                    elif kind == "chunk" and generate_at is not None:
                        self.ctx.metrics.ttft.labels("hit" if hit else "miss").observe(
                            time.monotonic() - generate_at
                        )
                        generate_at = None
                    elif kind == "error":
                        self.ctx.metrics.error(str(data.get("code")))
                    self.conn.send(data)
                    if kind == "error" and not prefilled:
                        return None, True
                    if kind == "done":
                        self.ctx.metrics.turns.inc()
                        self.record.turns += 1
                        return data.get("history_hash"), True
                    from_worker = asyncio.ensure_future(wws.recv())
        finally:
            for task in (from_worker, from_client):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
