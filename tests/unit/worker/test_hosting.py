"""Fencing at the worker: a gateway's session carries its assignment's epoch; the worker takes only
newer ones, refuses a stale or repeated one at once, and says the highest it has seen."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from omnivox.core.config import Settings
from omnivox.core.errors import StaleAssignment
from omnivox.engines.echo import EchoEngine
from omnivox.protocol.control.internal import GATEWAY_HEADER
from omnivox.protocol.control.workers import WorkerState
from omnivox.worker.app import create_worker_app
from omnivox.worker.host import EngineHost

USER = [{"role": "user", "content": "hello"}]


def test_the_host_takes_only_newer_epochs() -> None:
    host = EngineHost(EchoEngine())
    host.fence(None)  # a direct client names none: nothing to fence
    host.fence(3)
    with pytest.raises(StaleAssignment) as caught:
        host.fence(2)
    assert caught.value.details == {"epoch": 2, "seen": 3}
    with pytest.raises(StaleAssignment):
        host.fence(3)  # a second session for the same assignment
    host.fence(7)
    assert host.epoch == 7 and host.health().epoch == 0  # no session has started yet
    host.settle()
    assert host.health().epoch == 7


async def test_health_reports_a_new_epoch_only_once_its_session_has_started() -> None:
    """Between taking an assignment's epoch and starting its session the worker is IDLE; a report
    of IDLE with that epoch would tell the gateway the session is over and free the worker under it."""
    host = EngineHost(EchoEngine())
    await host.load()
    host.fence(4)
    await host.acquire()
    health = host.health()
    assert (health.state, health.epoch) == (WorkerState.IDLE, 0)
    host.begin(WorkerState.BUSY_STREAMING)
    health = host.health()
    assert (health.state, health.epoch) == (WorkerState.BUSY_STREAMING, 4)
    await host.release()
    health = host.health()
    assert (health.state, health.epoch) == (WorkerState.IDLE, 4)  # now: the session is over


def _ready(client: TestClient) -> None:
    for _ in range(200):
        if client.get("/health").json()["state"] == "IDLE":
            return
        time.sleep(0.02)
    raise AssertionError("the worker did not load")


def _turn(client: TestClient, epoch: int) -> dict:
    with client.websocket_connect(f"/ws/streaming/s{epoch}?worker_id=w&ticket=t{epoch}&epoch={epoch}") as ws:
        ws.send_json({"type": "prefill", "messages": USER})
        return ws.receive_json()


def test_a_stale_assignment_is_refused_at_once_and_a_newer_one_served() -> None:
    app = create_worker_app(Settings(engine="echo"), engine=EchoEngine())
    with TestClient(app) as client:
        _ready(client)
        assert _turn(client, 5)["type"] == "prefill_done"
        for stale in (4, 5):
            with client.websocket_connect(f"/ws/streaming/x?worker_id=w&ticket=old&epoch={stale}") as ws:
                refusal = ws.receive_json()
                assert refusal["code"] == "stale_assignment", refusal
                with pytest.raises(WebSocketDisconnect) as closed:
                    ws.receive_json()
                assert closed.value.code == 1008
        assert _turn(client, 6)["type"] == "prefill_done"
        assert client.get("/health").json()["epoch"] == 6


def test_a_gateway_s_stale_assignment_is_refused_at_the_handshake_with_409() -> None:
    app = create_worker_app(Settings(engine="echo"), engine=EchoEngine())
    with TestClient(app) as client:
        _ready(client)
        assert _turn(client, 5)["type"] == "prefill_done"
        with pytest.raises(WebSocketDenialResponse) as denied:  # no socket opened: no session began
            with client.websocket_connect(
                "/ws/streaming/x?worker_id=w&ticket=old&epoch=5", headers={GATEWAY_HEADER: "1"}
            ):
                pass
        assert denied.value.status_code == 409
        assert denied.value.json()["code"] == "stale_assignment"
        assert client.get("/health").json()["state"] == "IDLE"  # it cost the worker nothing
        with client.websocket_connect(
            "/ws/streaming/s6?worker_id=w&ticket=t6&epoch=6", headers={GATEWAY_HEADER: "1"}
        ) as ws:  # a newer one opens, and is fenced once (not refused by its own check)
            ws.send_json({"type": "prefill", "messages": USER})
            kind = ws.receive_json()["type"]
            while kind.startswith("omnivox.internal."):  # what only the gateway reads
                kind = ws.receive_json()["type"]
            assert kind == "prefill_done"
        assert client.get("/health").json()["epoch"] == 6
