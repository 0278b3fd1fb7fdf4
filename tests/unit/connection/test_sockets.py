"""The two socket kinds behind one interface: an ASGI WebSocket and a websockets client connection."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from starlette.websockets import WebSocketDisconnect

from omnivox.connection.sockets import AsgiSocket, ClientSocket, PeerGone


class FakeAsgi:
    """Just enough of starlette's WebSocket: scripted receives, recorded sends."""

    def __init__(self, messages: list[dict], fail: Exception | None = None) -> None:
        self.messages = messages
        self.sent: list[tuple[str, object]] = []
        self.fail = fail

    async def receive(self) -> dict:
        if not self.messages:
            raise RuntimeError('Cannot call "receive" once a disconnect message has been received.')
        return self.messages.pop(0)

    async def send_text(self, data: str) -> None:
        if self.fail:
            raise self.fail
        self.sent.append(("text", data))

    async def send_bytes(self, data: bytes) -> None:
        if self.fail:
            raise self.fail
        self.sent.append(("bytes", data))

    async def close(self, code: int = 1000) -> None:
        self.sent.append(("close", code))
        raise RuntimeError("already closed")  # close never raises to the caller


async def test_asgi_socket_reads_text_and_bytes_then_none_with_the_close_code() -> None:
    ws = FakeAsgi(
        [
            {"type": "websocket.receive", "text": "hi"},
            {"type": "websocket.receive", "bytes": b"\x00\x01"},
            {"type": "websocket.disconnect", "code": 1001},
        ]
    )
    s = AsgiSocket(ws)
    assert [await s.receive(), await s.receive(), await s.receive()] == ["hi", b"\x00\x01", None]
    assert s.close_code == 1001 and not s.dropped
    assert await s.receive() is None  # stays closed, never raises


async def test_asgi_socket_a_vanished_client_is_dropped() -> None:
    s = AsgiSocket(FakeAsgi([{"type": "websocket.disconnect", "code": 1006}]))
    assert await s.receive() is None and s.dropped
    s2 = AsgiSocket(FakeAsgi([]))  # the server already saw the disconnect
    assert await s2.receive() is None


async def test_asgi_socket_sends_and_turns_every_failure_into_peer_gone() -> None:
    ws = FakeAsgi([])
    s = AsgiSocket(ws)
    await s.send("t")
    await s.send(b"b")
    assert ws.sent == [("text", "t"), ("bytes", b"b")]
    for failure in (WebSocketDisconnect(1001), RuntimeError("closed"), OSError("reset")):
        with pytest.raises(PeerGone):
            await AsgiSocket(FakeAsgi([], fail=failure)).send("x")
    await s.close(1008)  # does not raise even when the transport complains
    assert ws.sent[-1] == ("close", 1008)


@pytest.fixture
async def echo_server():
    """A websockets server that echoes, closes on "close:<code>", or drops on "drop"."""

    async def handler(conn) -> None:
        async for msg in conn:
            if msg == "drop":
                conn.transport.abort()  # no close frame
                return
            if isinstance(msg, str) and msg.startswith("close:"):
                await conn.close(int(msg.split(":")[1]))
                return
            await conn.send(msg)

    async with websockets.serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}"


async def test_client_socket_round_trip_and_a_clean_close(echo_server) -> None:
    s = ClientSocket(await websockets.connect(echo_server))
    await s.send("hello")
    await s.send(b"\x01")
    assert await s.receive() == "hello" and await s.receive() == b"\x01"
    await s.send("close:1011")
    assert await s.receive() is None
    assert s.close_code == 1011 and not s.dropped
    with pytest.raises(PeerGone):
        await s.send("after")
    await s.close()  # harmless


async def test_client_socket_tells_a_dropped_connection(echo_server) -> None:
    s = ClientSocket(await websockets.connect(echo_server))
    await s.send("drop")
    assert await asyncio.wait_for(s.receive(), 5) is None
    assert s.dropped and s.close_code is None
