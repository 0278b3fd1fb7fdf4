"""A small client for the duplex protocol (the MiniCPM-o demo's flow), on the real `websockets`."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from omnivox.audio.pcm import float32_to_b64
from wsclient import JsonClient


class DuplexClient(JsonClient):
    """``speed``: how much faster than real time chunks are sent (a live client sends one chunk per
    chunk of audio; tests go faster, but not so fast that the server's hearing cannot keep up)."""

    def __init__(
        self, base_ws: str, session_id: str, timeout: float = 20.0, query: str = "", speed: float = 4.0
    ) -> None:
        super().__init__(f"{base_ws}/ws/duplex/{session_id}" + (f"?{query}" if query else ""), timeout)
        self.speed = speed
        self._due: float | None = None  # when the next chunk is due (loop time)

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
