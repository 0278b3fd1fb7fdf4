"""A simulated caller of a pipecat bot over pipecat's WebSocket wire, paced and timed exactly as
``bench realtime``'s callers are (``bench.paced_caller``).

The wire is what pipecat's own clients speak to ``FastAPIWebsocketTransport`` with the
``ProtobufFrameSerializer``: every WebSocket message is one binary ``pipecat.Frame`` protobuf, the
microphone's ``audio`` frames (PCM16 at 16 kHz, the rate pipecat's VAD, smart-turn and Whisper take;
the transport does not resample) going up, the bot's ``audio`` frames (PCM16, 24 kHz) and RTVI
messages (``message`` frames holding JSON: ``bot-ready``, ``bot-stopped-speaking``, ``error``...)
coming down. The caller says ``client-ready`` and waits for ``bot-ready`` before it speaks, as
pipecat's clients do. A reply is over at the first ``bot-stopped-speaking`` after both
``bot-llm-stopped`` and ``bot-tts-stopped`` (the LLM has finished and every sentence has been
synthesised): pipecat also says the bot stopped speaking whenever its output ran dry for 0.35 s,
which under load happens between two sentences of one reply. A reply has been heard once it has
played out.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable, Sequence
from typing import Any

import numpy as np
import websockets

from omnivox.audio.pcm import to_pcm16
from omnivox.bench.paced_caller import PAUSE_S, CallerStats, Clip, Microphone, ReplyTimer, converse

IN_RATE = 16000
OUT_RATE = 24000
RTVI_LABEL = "rtvi-ai"
RTVI_VERSION = "1.0.0"
READY_TIMEOUT_S = 30.0
# what pipecat says once a reply has all been produced; the reply is over when the bot next stops speaking
REPLY_PRODUCED = frozenset({"bot-llm-stopped", "bot-tts-stopped"})


def _frames() -> Any:
    """pipecat's protobuf schema (``pipecat/frames/protobufs/frames.proto``)."""
    from pipecat.frames.protobufs import frames_pb2

    return frames_pb2


def audio_message(chunk: np.ndarray, rate: int = IN_RATE) -> bytes:
    """One protobuf ``audio`` frame holding ``chunk`` (float samples) as mono PCM16."""
    frame = _frames().Frame()
    frame.audio.audio = to_pcm16(chunk)
    frame.audio.sample_rate = rate
    frame.audio.num_channels = 1
    return bytes(frame.SerializeToString())


def rtvi_message(kind: str, data: dict[str, Any] | None = None, request_id: str = "1") -> bytes:
    """One protobuf ``message`` frame holding an RTVI client message."""
    frame = _frames().Frame()
    body: dict[str, Any] = {"label": RTVI_LABEL, "type": kind, "id": request_id}
    if data is not None:
        body["data"] = data
    frame.message.data = json.dumps(body)
    return bytes(frame.SerializeToString())


def parse_message(raw: bytes | str) -> tuple[str, Any]:
    """A message from the bot: ``("audio", PCM16 samples)``, ``("rtvi", the JSON message)``, or
    ``(kind, None)`` for any other frame (text, transcription, interruption)."""
    if isinstance(raw, str):
        raise ValueError("pipecat's protobuf wire sends binary messages only")
    frame = _frames().Frame.FromString(raw)
    kind = frame.WhichOneof("frame")
    if kind == "audio":
        return "audio", np.frombuffer(frame.audio.audio, "<i2")
    if kind == "message":
        return "rtvi", json.loads(frame.message.data)
    return str(kind), None


class PipecatCaller:
    """One simulated user of a pipecat bot: ``clips`` at 16 kHz into its microphone, ``chunk_ms`` at
    a time; what it measured in ``stats``."""

    def __init__(self, url: str, clips: Sequence[Clip], chunk_ms: int, pause_s: float = PAUSE_S) -> None:
        self.url = url
        self.clips = clips
        self.chunk_ms = chunk_ms
        self.pause_s = pause_s  # before the next sentence once a reply has played out
        self.stats = CallerStats()
        self.timer = ReplyTimer(self.stats, OUT_RATE)
        self.bot_ready = asyncio.Event()
        self.produced: set[str] = set()  # which of REPLY_PRODUCED the reply in progress has seen

    async def run(self, turns: int, offset_s: float) -> CallerStats:
        await asyncio.sleep(offset_s)  # callers do not all start on the same frame
        try:
            async with websockets.connect(self.url, max_size=None, ping_interval=None) as ws:
                reader = asyncio.create_task(self.read_messages(ws))
                try:
                    await ws.send(rtvi_message("client-ready", {"version": RTVI_VERSION}))
                    await asyncio.wait_for(self.bot_ready.wait(), READY_TIMEOUT_S)

                    async def send(chunk: np.ndarray) -> None:
                        await ws.send(audio_message(chunk))

                    mic = Microphone(send, IN_RATE, self.chunk_ms)
                    await converse(mic, self.timer, self.clips, turns, self.pause_s)
                finally:
                    reader.cancel()
        except TimeoutError:
            self.stats.errors.append("timeout: no bot-ready")
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            self.stats.errors.append(f"connection: {type(exc).__name__}")
        return self.stats

    async def read_messages(self, ws: AsyncIterable[bytes | str]) -> None:
        """Read the bot's frames until the connection ends, feeding the replies' audio to the
        timer; RTVI ``error`` messages count as errors."""
        async for raw in ws:
            kind, value = parse_message(raw)
            if kind == "audio":
                self.timer.audio(value, time.monotonic())
            elif kind == "rtvi":
                self.on_rtvi(value)

    def on_rtvi(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "bot-ready":
            self.bot_ready.set()
        elif kind in REPLY_PRODUCED:
            self.produced.add(kind)
        elif kind == "bot-stopped-speaking" and self.produced >= REPLY_PRODUCED:
            self.produced.clear()
            self.timer.reply_finished(time.monotonic())
        elif kind in ("error", "error-response"):
            data = message.get("data") or {}
            self.stats.errors.append(f"rtvi {kind}: {str(data.get('error') or data)[:60]}")
