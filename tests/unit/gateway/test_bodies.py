"""Bodies bounded while they are read: the route helper and the middleware behind every route."""

from __future__ import annotations

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
