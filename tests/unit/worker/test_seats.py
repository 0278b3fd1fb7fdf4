"""A worker process with several seats (``--seats``): each seat is a worker of its own under
``/seats/N`` (its health, state, epoch and sessions), all in one app; a path naming no seat is a
clear 404. Echo seats, each writing a word every 20 ms so sessions overlap."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from omnivox.core.config import Settings
from omnivox.core.errors import UnknownSeat
from omnivox.engines.echo import EchoEngine
from omnivox.protocol.control.internal import GATEWAY_HEADER
from omnivox.worker.app import create_worker_app
from omnivox.worker.host import EngineHost
from omnivox.worker.seats import Seats

SEATS = 3
LONG = [{"role": "user", "content": " ".join(f"word{i}" for i in range(200))}]
SHORT = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def client() -> TestClient:
    engines = [EchoEngine(word_delay_s=0.02) for _ in range(SEATS)]
    app = create_worker_app(Settings(engine="echo"), engines=engines, public_url="http://127.0.0.1:9")
    with TestClient(app) as c:
        for seat in range(SEATS):
            _wait(c, seat, lambda h: h["state"] == "IDLE")
        yield c


def _wait(client: TestClient, seat: int, ok, timeout: float = 10.0) -> dict:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        health = client.get(f"/seats/{seat}/health").json()
        if ok(health):
            return health
        if time.monotonic() > deadline:
            raise AssertionError(f"seat {seat}: {health}")
        time.sleep(0.02)


def _turn(ws, messages: list[dict]) -> str:  # type: ignore[no-untyped-def]
    ws.send_json({"type": "prefill", "messages": messages})
    assert ws.receive_json()["type"] == "prefill_done"
    ws.send_json({"type": "generate"})
    text = []
    while (msg := ws.receive_json())["type"] != "done":
        text.append(msg.get("text_delta") or "")
    return "".join(text)


def test_seats_are_workers_of_their_own_at_their_paths() -> None:
    seats = Seats([EngineHost(EchoEngine()) for _ in range(SEATS)], "http://w:7/")
    assert [s.url for s in seats.all] == [f"http://w:7/seats/{i}" for i in range(SEATS)]
    assert seats.prefix == "/seats/{seat}" and seats.find("2") is seats.all[2].host
    for bad in ("3", "01", "-1", "x", "", None):
        with pytest.raises(UnknownSeat):
            seats.find(bad)
    alone = Seats([EngineHost(EchoEngine())], "http://w:7")
    assert alone.prefix == "" and alone.all[0].url == "http://w:7" and alone.find(None) is alone.all[0].host


def test_sessions_on_two_seats_run_at_once_and_one_vanishing_costs_the_other_nothing(client) -> None:
    with client.websocket_connect("/seats/0/ws/streaming/a?epoch=1") as slow:
        slow.send_json({"type": "prefill", "messages": LONG})
        assert slow.receive_json()["type"] == "prefill_done"
        slow.send_json({"type": "generate"})  # 200 words at 20 ms: seat 0 is busy for 4 s
        assert slow.receive_json()["type"] == "chunk"
        _wait(client, 0, lambda h: h["state"] == "BUSY_STREAMING")
        with client.websocket_connect("/seats/1/ws/streaming/b?epoch=1") as other:
            assert _turn(other, SHORT).endswith("hello there")  # while seat 0's reply runs
            assert client.get("/seats/0/health").json()["state"] == "BUSY_STREAMING"
            # seat 0's client vanishes mid-reply; seat 1's session goes on
            slow.close()
            _wait(client, 0, lambda h: h["state"] == "IDLE" and h["sessions_served"] == 1)
            assert _turn(other, SHORT).endswith("hello there")
    _wait(client, 1, lambda h: h["state"] == "IDLE" and h["sessions_served"] == 1)
    # the vanished session's seat was released: it takes the next assignment
    with client.websocket_connect("/seats/0/ws/streaming/c?epoch=2") as again:
        assert _turn(again, SHORT).endswith("hello there")
    health = _wait(client, 0, lambda h: h["sessions_served"] == 2)
    assert health["epoch"] == 2 and client.get("/seats/2/health").json()["sessions_served"] == 0


def test_the_process_reports_every_seat_s_health_in_one_reply_in_seat_order(client) -> None:
    with client.websocket_connect("/seats/1/ws/streaming/a?epoch=4") as ws:
        _turn(ws, SHORT)
    _wait(client, 1, lambda h: h["sessions_served"] == 1)
    reports = client.get("/seats/health").json()["seats"]
    assert reports == [client.get(f"/seats/{seat}/health").json() for seat in range(SEATS)]
    assert [r["sessions_served"] for r in reports] == [0, 1, 0] and reports[1]["epoch"] == 4


def test_epochs_are_fenced_per_seat(client) -> None:
    with client.websocket_connect("/seats/0/ws/streaming/a?epoch=5") as ws:
        _turn(ws, SHORT)
    _wait(client, 0, lambda h: h["epoch"] == 5)
    # seat 0 refuses an assignment older than (or equal to) its newest, at the handshake
    for stale in (4, 5):
        with pytest.raises(WebSocketDenialResponse) as denied:
            with client.websocket_connect(
                f"/seats/0/ws/streaming/x?epoch={stale}", headers={GATEWAY_HEADER: "1"}
            ):
                pass
        assert denied.value.status_code == 409 and denied.value.json()["code"] == "stale_assignment"
    # seat 1 has seen none of them: epoch 3 is new to it
    with client.websocket_connect("/seats/1/ws/streaming/b?epoch=3", headers={GATEWAY_HEADER: "1"}) as ws:
        ws.send_json({"type": "prefill", "messages": SHORT})
        while (kind := ws.receive_json()["type"]).startswith("omnivox.internal."):
            pass
        assert kind == "prefill_done"
    # the epoch is taken at the handshake, the seat freed once the session's cleanup ran: wait for both
    _wait(client, 1, lambda h: h["epoch"] == 3 and h["state"] == "IDLE")
    assert client.get("/seats/0/health").json()["epoch"] == 5


@pytest.mark.parametrize("seat", ["3", "01", "x", "99999999999999999999"])
def test_a_path_naming_no_seat_is_a_clear_404(client, seat: str) -> None:
    reply = client.get(f"/seats/{seat}/health")
    assert reply.status_code == 404
    error = reply.json()["detail"]
    assert error["code"] == "unknown_seat" and "seats 0 to 2" in error["message"]
    with pytest.raises(WebSocketDenialResponse) as denied:
        with client.websocket_connect(f"/seats/{seat}/ws/streaming/s?epoch=9", headers={GATEWAY_HEADER: "1"}):
            pass
    assert denied.value.status_code == 404 and denied.value.json()["code"] == "unknown_seat"
    assert client.get("/health").status_code == 404  # a seated process has no worker at its root
    for i in range(SEATS):  # and it cost no seat anything
        assert client.get(f"/seats/{i}/health").json()["epoch"] == 0


def test_a_worker_key_is_asked_before_the_seat_is_looked_up() -> None:
    settings = Settings(engine="echo", worker_key="k")
    app = create_worker_app(settings, engines=[EchoEngine(), EchoEngine()])
    with TestClient(app) as c:
        assert c.get("/seats/5/health").status_code == 401
        assert c.get("/seats/1/health", headers={"Authorization": "Bearer k"}).status_code == 200
        assert c.get("/seats/health").status_code == 401
        assert len(c.get("/seats/health", headers={"Authorization": "Bearer k"}).json()["seats"]) == 2
        with pytest.raises(WebSocketDisconnect) as closed:
            with c.websocket_connect("/seats/5/ws/streaming/s"):
                pass
        assert closed.value.code == 1008
