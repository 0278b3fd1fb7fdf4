"""Bodies bounded while they are read: the route helper and the middleware behind every route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel

from omnivox.core.errors import MessageTooLarge
from omnivox.gateway.bodies import BodyLimit, bounded_stream, declared_length, read_body


async def test_bounded_stream_stops_reading_past_the_limit():
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield bytes(1000)

    got = 0
    with pytest.raises(MessageTooLarge):
        async for chunk in bounded_stream(endless(), 10_500):
            got += len(chunk)
    assert got == 10_000 and pulled == 11  # the chunk that crossed the limit is the last one read


@pytest.mark.parametrize(
    ("value", "length"),
    [("12", 12), (" 7 ", 7), ("", None), ("-1", None), ("１２", None), ("9" * 40, None), ("1e3", None)],
)
def test_only_a_plain_content_length_is_taken(value, length):
    assert declared_length({"content-length": value}) == length


class Report(BaseModel):
    name: str


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/raw")
    async def raw(request: Request) -> dict[str, int]:
        try:
            return {"read": len(await read_body(request, 100))}
        except MessageTooLarge as err:
            return {"refused": err.http_status}

    @app.post("/model")
    async def model(body: Report) -> dict[str, str]:  # FastAPI reads this body itself
        return {"name": body.name}

    app.add_middleware(BodyLimit, ceiling=1000)
    return app


def test_a_route_reads_within_its_limit_and_refuses_past_it():
    client = TestClient(_app())
    assert client.post("/v1/raw", content=b"x" * 100).json() == {"read": 100}
    assert client.post("/v1/raw", content=b"x" * 101).json() == {"refused": 413}

    def chunked():  # no Content-Length: counted as it comes
        for _ in range(5):
            yield b"x" * 50

    assert client.post("/v1/raw", content=chunked()).json() == {"refused": 413}


def test_the_middleware_bounds_a_body_the_framework_reads():
    client = TestClient(_app())
    assert client.post("/model", json={"name": "a"}).json() == {"name": "a"}
    big = client.post("/model", json={"name": "a" * 2000})
    assert big.status_code == 413
    assert big.json()["detail"]["code"] == "message_too_large"

    def chunked():
        yield b'{"name": "'
        for _ in range(30):
            yield b"a" * 100
        yield b'"}'

    streamed = client.post("/model", content=chunked(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413  # not FastAPI's 400 for a failed body read


def test_openai_paths_get_openai_shaped_errors():
    client = TestClient(_app())
    resp = client.post("/v1/raw", content=b"x" * 5000)
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "message_too_large"


# ---- the middleware over a bare ASGI app: what reaches the app, and what the client gets


def _receiver(*chunks: bytes):
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return receive


async def _call(app, *chunks: bytes, path: str = "/x", headers=(), scope_type: str = "http"):
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {"type": scope_type, "path": path, "headers": list(headers)}
    await BodyLimit(app, ceiling=10)(scope, _receiver(*chunks), send)
    return sent


def _reading_app(seen: list[bytes]):
    async def app(scope, receive, send):
        try:
            while True:
                message = await receive()
                seen.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
        except Exception:
            await send({"type": "http.response.start", "status": 400, "headers": []})
            await send({"type": "http.response.body", "body": b"bad body"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


async def test_a_body_within_the_ceiling_reaches_the_app_whole() -> None:
    seen: list[bytes] = []
    sent = await _call(_reading_app(seen), b"12345", b"67890")
    assert seen == [b"12345", b"67890"] and sent[0]["status"] == 200 and sent[1]["body"] == b"ok"


async def test_the_app_answer_to_a_read_past_the_ceiling_is_replaced_by_413() -> None:
    seen: list[bytes] = []
    sent = await _call(_reading_app(seen), b"123456", b"7890X", b"never read")
    assert seen == [b"123456"]  # the chunk that passed the ceiling never reaches the app
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["detail"]["code"] == "message_too_large"


async def test_a_declared_length_over_the_ceiling_is_refused_without_calling_the_app() -> None:
    seen: list[bytes] = []
    sent = await _call(_reading_app(seen), b"x", path="/v1/files", headers=[(b"Content-Length", b"11")])
    assert seen == [] and sent[0]["status"] == 413
    body = json.loads(sent[1]["body"])
    assert body["error"]["code"] == "message_too_large" and "11 bytes" in body["error"]["message"]
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()


async def test_an_app_that_answered_before_the_ceiling_passed_keeps_its_answer() -> None:
    async def early(scope, receive, send):
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await receive()
        await receive()  # passes the ceiling: raises into the app
        await send({"type": "http.response.body", "body": b"late"})

    sent = await _call(early, b"12345678", b"90123")
    assert sent == [{"type": "http.response.start", "status": 202, "headers": []}]  # no second start


async def test_an_apps_own_failure_is_not_swallowed() -> None:
    async def broken(scope, receive, send):
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        await _call(broken, b"small")


async def test_websockets_and_lifespan_pass_untouched() -> None:
    called: list[str] = []

    async def app(scope, receive, send):
        called.append(scope["type"])

    await _call(app, b"x" * 100, scope_type="websocket", headers=[(b"content-length", b"100")])
    await _call(app, scope_type="lifespan")
    assert called == ["websocket", "lifespan"]
