"""Small clients for omnivox's JSON WebSocket protocols, on the real `websockets` library."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Self

import websockets


class JsonClient:
    """One session's socket: send typed messages, read them back, wait for a type."""

    def __init__(self, url: str, timeout: float = 20.0) -> None:
        self.url = url
        self.timeout = timeout
        self.ws: Any = None
        self.seen: list[dict[str, Any]] = []

    async def __aenter__(self) -> Self:
        self.ws = await websockets.connect(self.url, max_size=64 * 1024 * 1024)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def send(self, type: str, **fields: Any) -> None:
        await self.ws.send(json.dumps({"type": type, **fields}))

    async def recv(self) -> dict[str, Any]:
        msg = json.loads(await asyncio.wait_for(self.ws.recv(), self.timeout))
        self.seen.append(msg)
        return msg

    async def until(self, *types: str) -> list[dict[str, Any]]:
        """Messages up to and including the first whose type is in ``types``."""
        got = []
        while True:
            msg = await self.recv()
            got.append(msg)
            if msg["type"] in types:
                return got


class StreamingClient(JsonClient):
    def __init__(self, base_ws: str, session_id: str, timeout: float = 20.0) -> None:
        super().__init__(f"{base_ws}/ws/streaming/{session_id}", timeout)

    async def turn(self, messages: list[dict[str, Any]], **generate: Any) -> dict[str, Any]:
        """prefill + generate; returns prefill_done, the reply text, the chunks and done."""
        await self.send("prefill", messages=messages)
        got = await self.until("prefill_done", "error")
        if got[-1]["type"] == "error":
            return {"error": got[-1], "messages": got}
        prefill_done = got[-1]
        await self.send("generate", **generate)
        rest = await self.until("done", "error")
        chunks = [m for m in rest if m["type"] == "chunk"]
        return {
            "prefill_done": prefill_done,
            "chunks": chunks,
            "text": "".join(c.get("text_delta", "") for c in chunks),
            "done": rest[-1],
            "messages": got + rest,
        }
