"""A carrier's side of a media stream (Twilio, Telnyx, Plivo), written from their documentation,
for benchmarks and tests: it opens ``WS /telephony/{carrier}/stream`` as the carrier would, says
``connected`` and ``start``, sends the caller's audio as 20 ms mu-law ``media`` in real time, and
plays what it is sent in real time: each marker (Twilio/Telnyx ``mark``, Plivo ``checkpoint``) is
echoed once the audio before it has played, and ``clear`` drops what has not played and echoes
the pending markers at once (as Twilio does). ``buffer_s`` holds what it is sent that long before
playing it (a carrier's jitter buffer, or a slow network: the caller hears the reply later than
omnivox sent it, and the markers say so).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from typing import Any

import numpy as np
import websockets

from omnivox.audio.g711 import ulaw_decode, ulaw_encode
from omnivox.audio.resample import resample

RATE = 8000
FRAME = RATE // 50  # 20 ms of mu-law: 160 bytes


class CarrierStream:
    """One call's stream, as ``carrier`` sends it."""

    def __init__(self, carrier: str = "twilio", buffer_s: float = 0.0) -> None:
        self.carrier = carrier
        self.buffer_s = buffer_s  # audio waits this long before it plays
        self.stream_id = f"MZ{uuid.uuid4().hex}" if carrier == "twilio" else str(uuid.uuid4())
        self.call_sid = f"CA{uuid.uuid4().hex}"
        self.ws: Any = None
        self.received: list[tuple[float, dict[str, Any]]] = []  # every message omnivox sent
        self.played = bytearray()  # what the caller heard, in order
        self.play_log: list[tuple[float, int]] = []  # (when, offset in played) each 20 ms began playing
        self.media_at: list[float] = []  # when each media message arrived
        self.marked_ms = 0.0  # audio played up to the last marker echoed as played
        self.echoed: list[str] = []  # markers echoed as played
        self.cleared_marks: list[str] = []  # markers echoed because a clear dropped their audio
        self.clears: list[float] = []  # when each clear arrived
        self.marked_at_clear: list[float] = []  # marked_ms when each clear arrived
        self._queue: list[tuple[str, bytes | str]] = []  # ("audio", bytes) and ("mark", name), unplayed
        self._seq = 0
        self._chunk = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._new = asyncio.Event()
        self._talking = asyncio.Lock()  # held while speak sends; else the line sends silence

    async def open(
        self, url: str, headers: dict[str, str] | None = None, parameters: dict[str, str] | None = None
    ) -> None:
        self.ws = await websockets.connect(url, additional_headers=headers or {}, max_size=2**20)
        if self.carrier != "plivo":
            await self._send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await self._send(self._start(parameters or {}))
        self._tasks = [
            asyncio.create_task(self._read()),
            asyncio.create_task(self._play()),
            asyncio.create_task(self._line()),
        ]

    def _start(self, parameters: dict[str, str]) -> dict[str, Any]:
        if self.carrier == "twilio":
            body: dict[str, Any] = {
                "streamSid": self.stream_id,
                "accountSid": "AC" + "0" * 32,
                "callSid": self.call_sid,
                "tracks": ["inbound"],
                "customParameters": parameters,
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            }
            return {
                "event": "start",
                "sequenceNumber": self._next(),
                "start": body,
                "streamSid": self.stream_id,
            }
        if self.carrier == "telnyx":
            body = {
                "call_control_id": self.call_sid,
                "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
                "to": parameters.get("To"),  # null when the call has none, as Telnyx sends it
                "from": parameters.get("From"),
            }
            return {
                "event": "start",
                "sequence_number": self._next(),
                "start": body,
                "stream_id": self.stream_id,
            }
        body = {
            "callId": self.call_sid,
            "streamId": self.stream_id,
            "accountId": "MA0000",
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        }
        return {"event": "start", "sequenceNumber": int(self._next()), "start": body}

    def _next(self) -> str:
        self._seq += 1
        return str(self._seq)

    async def _send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    def _media(self, payload: bytes) -> dict[str, Any]:
        self._chunk += 1
        body = {
            "track": "inbound",
            "chunk": str(self._chunk),
            "timestamp": str(self._chunk * 20),
            "payload": base64.b64encode(payload).decode(),
        }
        key = {"twilio": "streamSid", "telnyx": "stream_id", "plivo": "streamId"}[self.carrier]
        return {"event": "media", "sequenceNumber": self._next(), "media": body, key: self.stream_id}

    async def speak(self, audio: np.ndarray, rate: int) -> float:
        """Send ``audio`` (float32 at ``rate``) as the caller's 20 ms mu-law media in real time, each
        frame once it has been "recorded"; returns when its first sample was (the clock of it)."""
        ulaw = ulaw_encode(resample(audio, rate, RATE))
        async with self._talking:
            start = time.monotonic()
            for n, i in enumerate(range(0, len(ulaw), FRAME)):
                await asyncio.sleep(max(0.0, start + (n + 1) * 0.02 - time.monotonic()))
                await self._send(self._media(ulaw[i : i + FRAME].ljust(FRAME, b"\xff")))
        return start

    async def _line(self) -> None:
        """What a carrier does between words: media every 20 ms, silence when nobody speaks."""
        with contextlib.suppress(websockets.ConnectionClosed):
            start, n = time.monotonic(), 0
            while True:
                n += 1
                await asyncio.sleep(max(0.0, start + n * 0.02 - time.monotonic()))
                if self._talking.locked():
                    start, n = time.monotonic(), 0
                    async with self._talking:
                        pass
                    continue
                await self._send(self._media(b"\xff" * FRAME))

    async def silence(self, seconds: float) -> None:
        await self.speak(np.zeros(int(RATE * seconds), np.float32), RATE)

    async def press(self, digit: str) -> None:
        key = {"twilio": "streamSid", "telnyx": "stream_id", "plivo": "streamId"}[self.carrier]
        await self._send(
            {
                "event": "dtmf",
                key: self.stream_id,
                "sequenceNumber": self._next(),
                "dtmf": {"track": "inbound_track", "digit": digit},
            }
        )

    async def stop(self) -> None:
        if self.carrier == "twilio":
            body = {"accountSid": "AC" + "0" * 32, "callSid": self.call_sid}
            await self._send(
                {"event": "stop", "sequenceNumber": self._next(), "streamSid": self.stream_id, "stop": body}
            )
        elif self.carrier == "telnyx":
            await self._send(
                {"event": "stop", "sequence_number": self._next(), "stream_id": self.stream_id, "stop": {}}
            )

    async def _echo(self, name: str) -> None:
        if self.carrier == "plivo":
            await self._send(
                {
                    "event": "playedStream",
                    "sequenceNumber": int(self._next()),
                    "streamId": self.stream_id,
                    "name": name,
                }
            )
        else:
            key = "streamSid" if self.carrier == "twilio" else "stream_id"
            await self._send(
                {"event": "mark", "sequenceNumber": self._next(), key: self.stream_id, "mark": {"name": name}}
            )

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in self.ws:
                message = json.loads(raw)
                self.received.append((time.monotonic(), message))
                kind = message.get("event")
                if kind in ("media", "playAudio"):
                    self.media_at.append(time.monotonic())
                    self._queue.append(("audio", base64.b64decode(message["media"]["payload"])))
                elif kind in ("mark", "checkpoint"):
                    name = message["mark"]["name"] if kind == "mark" else message["name"]
                    self._queue.append(("mark", name))
                elif kind in ("clear", "clearAudio"):
                    self.clears.append(time.monotonic())
                    self.marked_at_clear.append(self.marked_ms)
                    pending = [str(item) for what, item in self._queue if what == "mark"]
                    self._queue.clear()
                    for name in pending:
                        self.cleared_marks.append(name)
                        await self._echo(name)
                self._new.set()

    async def _play(self) -> None:
        """Play the queue in real time: 20 ms of audio per 20 ms; a marker is echoed when reached."""
        start, played = time.monotonic(), 0
        while True:
            if not self._queue:
                self._new.clear()
                await self._new.wait()
                await asyncio.sleep(self.buffer_s)  # (a clear meanwhile empties the queue)
                start, played = time.monotonic(), 0
                continue
            what, item = self._queue[0]
            if what == "mark":
                self._queue.pop(0)
                self.echoed.append(str(item))
                self.marked_ms = len(self.played) / 8
                await self._echo(str(item))
                continue
            assert isinstance(item, bytes)  # ("audio", bytes)
            audio = item
            take, rest = audio[:FRAME], audio[FRAME:]
            if rest:
                self._queue[0] = ("audio", rest)
            else:
                self._queue.pop(0)
            self.play_log.append((time.monotonic(), len(self.played)))
            self.played += take
            played += len(take)
            await asyncio.sleep(max(0.0, start + played / RATE - time.monotonic()))

    def received_messages(self) -> list[dict[str, Any]]:
        return [m for _, m in self.received]

    def of(self, event: str) -> list[dict[str, Any]]:
        return [m for _, m in self.received if m.get("event") == event]

    def first_sound_after(self, t: float, loud: float = 0.02) -> float | None:
        """When the caller began to hear the first loud sample played after ``t``."""
        for n, (at, offset) in enumerate(self.play_log):
            if at < t:
                continue
            end = self.play_log[n + 1][1] if n + 1 < len(self.play_log) else len(self.played)
            samples = np.nonzero(np.abs(ulaw_decode(bytes(self.played[offset:end]))) > loud)[0]
            if len(samples):
                return at + samples[0] / RATE
        return None

    def heard_audio(self) -> np.ndarray:
        return ulaw_decode(bytes(self.played)) if self.played else np.zeros(0, np.float32)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.ws is not None:
            await self.ws.close()
