"""A small client for the duplex protocol (the MiniCPM-o demo's flow), on the real `websockets`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import websockets

from omnivox.audio.pcm import float32_to_b64


class DuplexClient:
    """``speed``: how much faster than real time chunks are sent (a live client sends one chunk per
    chunk of audio; tests go faster, but not so fast that the server's hearing cannot keep up)."""

    def __init__(
        self, base_ws: str, session_id: str, timeout: float = 20.0, query: str = "", speed: float = 4.0
    ) -> None:
        self.url = f"{base_ws}/ws/duplex/{session_id}" + (f"?{query}" if query else "")
        self.timeout = timeout
        self.speed = speed
        self._due: float | None = None  # when the next chunk is due (loop time)
        self.ws: Any = None
        self.seen: list[dict[str, Any]] = []

    async def __aenter__(self) -> DuplexClient:
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
            got.append(await self.recv())
            if got[-1]["type"] in types:
                return got

    async def chunk(self, audio: np.ndarray, **fields: Any) -> dict[str, Any]:
        """Send one audio_chunk (float32, 16 kHz) when it is due and return the next result (or error)."""
        loop = asyncio.get_running_loop()
        if self._due is not None and self._due > loop.time():
            await asyncio.sleep(self._due - loop.time())
        self._due = max(self._due or 0.0, loop.time()) + len(audio) / 16000 / self.speed
        await self.send("audio_chunk", audio_base64=float32_to_b64(audio), **fields)
        return (await self.until("result", "error"))[-1]


def seconds(audio: np.ndarray, rate: int = 16000) -> list[np.ndarray]:
    """``audio`` cut into one-second chunks (the last one padded with silence)."""
    n = -(-len(audio) // rate) * rate
    padded = np.zeros(n, np.float32)
    padded[: len(audio)] = audio
    return [padded[i : i + rate] for i in range(0, n, rate)]
