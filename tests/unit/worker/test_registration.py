"""A worker's heartbeat: its seats registered in one request a round (each by its own report and
id), or seat by seat at a gateway without that path, and the next gateway when one fails.
The gateways are httpx mock transports (no gateway runs in a unit test)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest

from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState
from omnivox.worker import registration
from omnivox.worker.registration import heartbeat_loop


def _health(engine: str) -> Callable[[], WorkerHealth]:
    return lambda: WorkerHealth(state=WorkerState.IDLE, engine=engine, capabilities=Capabilities())


_CLIENT = httpx.AsyncClient
SEATS = [(f"http://w:7/seats/{i}", _health(f"seat{i}")) for i in range(3)]


async def _beats(
    monkeypatch, handler, seats, rounds: int, gateways: str = "http://g:1"
) -> list[httpx.Request]:  # type: ignore[no-untyped-def]
    """The requests ``heartbeat_loop`` makes until it has slept ``rounds`` times."""
    asked: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return handler(request)

    monkeypatch.setattr(
        registration.httpx,
        "AsyncClient",
        lambda **kw: _CLIENT(transport=httpx.MockTransport(record), **kw),
    )
    slept = 0
    done = asyncio.Event()
    real_sleep = asyncio.sleep

    async def sleep(_: float) -> None:
        nonlocal slept
        slept += 1
        if slept >= rounds:
            done.set()
            await asyncio.Event().wait()  # until cancelled
        await real_sleep(0)

    monkeypatch.setattr(registration.asyncio, "sleep", sleep)
    task = asyncio.ensure_future(heartbeat_loop(gateways, seats, 0.01))
    await asyncio.wait_for(done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return asked


def _reply(ids: list[str]) -> dict:
    return {"seats": [{"worker_id": i, "heartbeat_interval_s": 2.0} for i in ids]}


async def test_a_process_s_seats_register_in_one_request_a_round_keeping_their_ids(monkeypatch):
    def gateway(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/workers/register/seats"
        return httpx.Response(200, json=_reply(["w0", "w1", "w2"]))

    asked = await _beats(monkeypatch, gateway, SEATS, rounds=2)
    assert len(asked) == 2  # one request a round for three seats
    first, second = (json.loads(r.content)["seats"] for r in asked)
    assert [s["url"] for s in first] == [url for url, _ in SEATS]
    assert [s["health"]["engine"] for s in first] == ["seat0", "seat1", "seat2"]
    assert [s["worker_id"] for s in first] == [None] * 3 and [s["worker_id"] for s in second] == [
        "w0",
        "w1",
        "w2",
    ]


async def test_at_a_gateway_without_the_seats_path_each_seat_registers_alone(monkeypatch):
    def older(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/api/workers/register":
            return httpx.Response(404)
        seat = json.loads(request.content)["url"].rsplit("/", 1)[1]
        return httpx.Response(200, json={"worker_id": f"w{seat}", "heartbeat_interval_s": 2.0})

    asked = await _beats(monkeypatch, older, SEATS, rounds=2)
    paths = [r.url.path for r in asked]
    assert paths == ["/api/workers/register/seats"] + ["/api/workers/register"] * 6  # asked once only
    second = [json.loads(r.content) for r in asked[4:]]
    assert [(s["url"], s["worker_id"]) for s in second] == [
        (url, f"w{i}") for i, (url, _) in enumerate(SEATS)
    ]


async def test_a_failing_gateway_is_left_for_the_next_and_one_seat_registers_alone(monkeypatch):
    def gateways(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json=_reply(["w0", "w1", "w2"]))

    asked = await _beats(monkeypatch, gateways, SEATS, rounds=1, gateways="http://down:1,http://up:1")
    assert [(r.url.host, r.url.path) for r in asked] == [
        ("down", "/api/workers/register/seats"),
        ("up", "/api/workers/register/seats"),
    ]

    def one(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"worker_id": "w", "heartbeat_interval_s": 2.0})

    alone = await _beats(monkeypatch, one, SEATS[:1], rounds=1)
    assert [r.url.path for r in alone] == ["/api/workers/register"]
