"""The client edge's admission: a worker assigned to a client that leaves while the gateway is still
connecting to it goes back to the pool (it was held for good before: the gateway showed it busy with
no session on it)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from omnivox.connection.taps import Taps
from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app
from omnivox.gateway.edges.scopes import ClientRequest, SessionEdge, TurnEdge
from omnivox.gateway.edges.sessions import SessionRecord
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState
from omnivox.protocol.realtime.wire import REALTIME
from omnivox.protocol.streaming import STREAMING


async def test_a_client_leaving_while_its_worker_is_connected_to_gives_the_worker_back() -> None:
    ctx = create_gateway_app(Settings()).state.ctx
    pool = ctx.store.pool  # the in-memory store's
    worker = pool.add_worker("http://127.0.0.1:9")
    health = WorkerHealth(state=WorkerState.IDLE, engine="echo", capabilities=Capabilities(streaming=True))
    pool.apply_health(worker, health)
    record = SessionRecord(kind="streaming", client_session_id="s1", started_at=time.time())
    conn = SimpleNamespace(gone=asyncio.Event(), send=lambda frame: None)
    request = ClientRequest(session_id="s1", query={}, worker_params={})
    edge = TurnEdge(conn, STREAMING, ctx, record, request, Taps([]))  # type: ignore[arg-type]
    connecting = asyncio.Event()

    async def open_forever(assignment):  # the worker's handshake never finishes
        connecting.set()
        await asyncio.Event().wait()

    edge.open = open_forever  # type: ignore[method-assign]
    admitting = asyncio.ensure_future(edge.admit())
    await asyncio.wait_for(connecting.wait(), 5)
    assert worker.ticket_id is not None and worker.state.busy
    admitting.cancel()  # the client's connection ends: its task is cancelled
    await asyncio.gather(admitting, return_exceptions=True)
    assert worker.ticket_id is None  # the assignment is over: handed out once it says it is free
    pool.apply_health(worker, health)
    assert worker.state is WorkerState.IDLE and record.state.value == "idle"


def test_a_call_bridge_is_sent_every_frame_and_a_websocket_client_what_it_asked_for() -> None:
    """A call's bridge acts on omnivox's own events (a reply paused over speech pauses the carrier)
    whatever its caller asked for: the relay withholds nothing from it (the call withholds from its
    caller and sidebands itself). A WebSocket client is sent them only when it asks."""
    ctx = create_gateway_app(Settings()).state.ctx
    record = SessionRecord(kind="realtime", client_session_id="s1", started_at=time.time())
    conn = SimpleNamespace(gone=asyncio.Event(), send=lambda frame: None)
    paused = '{"type":"omnivox.interruption.paused","response_id":"r1"}'  # (as the worker writes it)

    def withheld(query: dict[str, str], bridge: bool):
        request = ClientRequest(session_id="s1", query=query, worker_params={}, bridge=bridge)
        return SessionEdge(conn, REALTIME, ctx, record, request, Taps([])).withheld  # type: ignore[arg-type]

    plain = withheld({}, bridge=False)
    assert plain is not None and plain(paused) and not plain('{"type": "response.done"}')
    assert withheld({"omnivox_events": "true"}, bridge=False) is None
    assert withheld({}, bridge=True) is None
