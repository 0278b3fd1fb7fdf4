"""Helpers for realtime tests: speech clips, streaming them into a session, waiting for events.

Sessions are driven through the official ``openai`` SDK (``AsyncOpenAI(...).realtime.connect``); a
raw ``websockets`` client is used only where the SDK cannot go (malformed frames).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import time
from typing import Any

import numpy as np
from openai import AsyncOpenAI

from omnivox.audio.pcm import to_pcm16
from omnivox.protocol.realtime.events import ga_type

RATE = 24000
OMNIVOX_EVENTS = {"omnivox_events": "true"}  # connect's extra_query: omnivox's own events too


@functools.cache
def speech(text: str) -> np.ndarray:
    """hibari saying ``text`` at 24 kHz (one TTS model for the whole test session)."""
    return np.concatenate([c.audio for c in _tts().synthesize(text)])


@functools.cache
def _tts():  # type: ignore[no-untyped-def]
    from omnivox.voice.tts.hibari import HibariTts

    return HibariTts(seed=0)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(RATE * seconds), np.float32)


def client(ws_base: str, api_key: str = "secret") -> AsyncOpenAI:
    http = ws_base.replace("ws://", "http://")
    return AsyncOpenAI(api_key=api_key, base_url=f"{http}/v1", websocket_base_url=f"{ws_base}/v1")


async def stream(conn: Any, audio: np.ndarray, chunk_ms: int = 40, speed: float = 1.0) -> None:
    """Append ``audio`` in ``chunk_ms`` pieces, ``speed`` times faster than real time (0: no pacing)."""
    step = RATE * chunk_ms // 1000
    start = time.monotonic()
    for n, i in enumerate(range(0, len(audio), step)):
        await conn.input_audio_buffer.append(audio=base64.b64encode(to_pcm16(audio[i : i + step])).decode())
        if speed:
            due = start + (n + 1) * chunk_ms / 1000 / speed
            await asyncio.sleep(max(0.0, due - time.monotonic()))


def user_text(text: str) -> dict:
    """A typed user message item (``conversation.item.create``'s ``item``)."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


class Events:
    """Every server event of a connection, with its arrival time, read by one background task."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.seen: list[tuple[float, Any]] = []
        self._new = asyncio.Event()
        self._task = asyncio.create_task(self._read())
        self.closed: BaseException | None = None

    async def _read(self) -> None:
        try:
            async for event in self.conn:
                self.seen.append((time.monotonic(), event))
                self._new.set()
        except Exception as exc:
            self.closed = exc
        self._new.set()

    def of(self, kind: str) -> list[Any]:
        return [e for _, e in self.seen if ga_type(e.type) == kind]

    def of_response(self, response_id: str) -> list[Any]:
        """The events from ``response.created`` to ``response.done`` of ``response_id``, in order."""
        out: list[Any] = []
        for _, e in self.seen:
            kind = ga_type(e.type)
            if kind == "response.created" and e.response.id == response_id:
                out = [e]
            elif out:
                out.append(e)
                if kind == "response.done" and e.response.id == response_id:
                    return out
        return out

    def times(self, kind: str) -> list[float]:
        return [t for t, e in self.seen if ga_type(e.type) == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 20.0, **match: Any) -> Any:
        """The ``count``-th event of type ``kind`` (whose attributes equal ``match``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.of(kind) if all(_get(e, k) == v for k, v in match.items())]
            if len(found) >= count:
                return found[count - 1]
            left = deadline - time.monotonic()
            if left <= 0 or (self._task.done() and not self._new.is_set()):
                seen = [e.type for _, e in self.seen]
                raise TimeoutError(f"no {kind} {match} after {timeout}s; saw {seen}")
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _get(event: Any, dotted: str) -> Any:
    value = event
    for part in dotted.split("__"):
        value = getattr(value, part, None)
    return value


def audio_of(events: Events, response_id: str) -> np.ndarray:
    from omnivox.audio.pcm import b64_to_pcm16

    deltas = events.of("response.output_audio.delta")
    chunks = [b64_to_pcm16(e.delta) for e in deltas if e.response_id == response_id]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


async def agents_sdk_turn(session: Any, message: str, timeout: float = 30.0) -> list[Any]:
    """Send ``message`` on an Agents SDK ``RealtimeSession``; its events until the turn that spoke
    (after any tool calls) is over."""
    seen: list[Any] = []
    await session.send_message(message)

    async def until_spoken() -> None:
        async for event in session:
            seen.append(event)
            if event.type == "agent_end" and any(e.type == "audio_end" for e in seen):
                return

    await asyncio.wait_for(until_spoken(), timeout)
    return seen


def agents_sdk_transcripts(seen: list[Any]) -> list[str]:
    """The spoken replies' transcripts among an Agents SDK session's events."""
    raw = [e.data for e in seen if e.type == "raw_model_event"]
    return [
        d.data.get("transcript")
        for d in raw
        if getattr(d, "type", "") == "raw_server_event"
        and d.data.get("type") == "response.output_audio_transcript.done"
    ]
