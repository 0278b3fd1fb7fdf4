"""The gateway's link to a worker: a plain WebSocket (no per-message deflate), against a real
``websockets`` server that would accept deflate if it were offered."""

from __future__ import annotations

from websockets.asyncio.server import ServerConnection, serve

from omnivox.core.config import Settings
from omnivox.gateway.edges.worker_link import connect_worker


async def test_the_worker_link_offers_no_compression_and_carries_frames_as_they_are() -> None:
    offered: list[str | None] = []

    async def echo(ws: ServerConnection) -> None:
        offered.append(ws.request.headers.get("Sec-WebSocket-Extensions") if ws.request else None)
        async for message in ws:
            await ws.send(message)

    async with serve(echo, "127.0.0.1", 0) as server:  # (its default: deflate when offered)
        port = server.sockets[0].getsockname()[1]
        link = await connect_worker(f"ws://127.0.0.1:{port}/", Settings())
        try:
            assert link.conn.protocol.extensions == []
            frame = '{"type": "input_audio_buffer.append", "audio": "' + "A" * 2560 + '"}'
            await link.conn.send(frame)
            assert await link.receive() == frame
        finally:
            await link.conn.close()
    assert offered == [None]
