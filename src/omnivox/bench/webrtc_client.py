"""A WebRTC caller of ``POST /v1/realtime/calls`` on aiortc, for benchmarks and tests.

It offers what a browser offers (one Opus audio track both ways, the ``oai-events`` data channel),
plays clips into its microphone track in real time (silence between them), records what the call
plays back, and keeps every event that arrives on the data channel with its arrival time.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import time
from collections import deque
from typing import Any

import aioice.ice
import av
import httpx
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from omnivox.bench.paced_caller import LOUD

RATE = 24000
FRAME = RATE // 50  # 20 ms


def loopback_only() -> None:
    """Gather ICE candidates on 127.0.0.1 only, in this process: calls to a gateway on this machine
    (started with ``webrtc_host_addresses=["127.0.0.1"]``) then never touch another interface."""
    aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"]


class ClipTrack(MediaStreamTrack):
    """A microphone: queued clips (float32 mono at 24 kHz) in real time, silence otherwise."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: deque[np.ndarray] = deque()
        self._start: float | None = None
        self._pts = 0
        self.sent_samples = 0  # audio time of the track so far
        self.clip_ends: list[float] = []  # when (monotonic) the frame after each clip's last went out
        self.clip_ended = asyncio.Event()  # set at each clip's end

    def play(self, audio: np.ndarray) -> None:
        pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
        for i in range(0, len(pcm), FRAME):
            self._queue.append(pcm[i : i + FRAME])
        self._queue.append(np.zeros(0, "<i2"))  # marks the clip's end

    @property
    def idle(self) -> bool:
        return not self._queue

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            await asyncio.sleep(max(0.0, self._start + self._pts / RATE - time.monotonic()))
        pcm = np.zeros(FRAME, "<i2")
        while self._queue and not len(self._queue[0]):
            self._queue.popleft()
            self.clip_ends.append(time.monotonic())
            self.clip_ended.set()
        if self._queue:
            piece = self._queue.popleft()
            pcm[: len(piece)] = piece
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = RATE, self._pts, fractions.Fraction(1, RATE)
        self._pts += FRAME
        self.sent_samples += FRAME
        return frame


class WebRtcCall:
    """One call: ``await WebRtcCall.open(url, key)``, then ``mic.play``, ``wait_for``, ``send``, ``close``."""

    def __init__(self) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))  # loopback: host candidates only
        self.mic = ClipTrack()
        self.pc.addTrack(self.mic)
        self.channel = self.pc.createDataChannel("oai-events")
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.heard = bytearray()  # what the call played back: PCM16 mono 24 kHz
        self.loud_at: list[
            float
        ] = []  # when (monotonic) each 20 ms of played audio arrived that was not silence
        self.call_id: str | None = None
        self.answer_sdp = ""
        self._new = asyncio.Event()
        self._open = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.channel.on("open", self._open.set)
        self.channel.on("message", self._on_message)
        self.pc.on("track", lambda track: self._tasks.append(asyncio.ensure_future(self._listen(track))))

    @classmethod
    async def open(
        cls,
        base_url: str,
        key: str | None = None,
        session: dict[str, Any] | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 - the HTTP request's and the channel's, not the caller's
    ) -> WebRtcCall:
        call = cls()
        await call.pc.setLocalDescription(await call.pc.createOffer())
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        url = f"{base_url}/v1/realtime/calls"
        async with httpx.AsyncClient(timeout=timeout) as http:
            if session is None:
                headers["Content-Type"] = "application/sdp"
                r = await http.post(url, content=call.pc.localDescription.sdp, headers=headers)
            else:  # as the openai SDK sends it
                files = {"sdp": (None, call.pc.localDescription.sdp), "session": (None, json.dumps(session))}
                r = await http.post(url, files=files, headers=headers)
        if r.status_code != 201:
            await call.pc.close()
            raise CallRefused(r.status_code, r.json() if r.content else {})
        call.call_id = r.headers["location"].rsplit("/", 1)[-1]
        call.answer_sdp = r.text
        await call.pc.setRemoteDescription(RTCSessionDescription(r.text, "answer"))
        await asyncio.wait_for(call._open.wait(), timeout)
        return call

    def _on_message(self, message: str | bytes) -> None:
        self.events.append((time.monotonic(), json.loads(message)))
        self._new.set()

    async def _listen(self, track: MediaStreamTrack) -> None:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            assert isinstance(frame, av.AudioFrame)  # an audio track's frames
            for out in resampler.resample(frame):
                pcm = out.to_ndarray().astype("<i2").reshape(-1)
                self.heard += pcm.tobytes()
                if np.abs(pcm).max(initial=0) > LOUD:
                    self.loud_at.append(time.monotonic())

    def send(self, event: dict[str, Any]) -> None:
        self.channel.send(json.dumps(event))

    def of(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e
            for _, e in self.events
            if e.get("type") == kind and all(e.get(k) == v for k, v in match.items())
        ]

    def times(self, kind: str) -> list[float]:
        return [t for t, e in self.events if e.get("type") == kind]

    async def wait_for(
        self,
        kind: str,
        count: int = 1,
        timeout: float = 20.0,  # noqa: ASYNC109 - as rtclient.Events.wait_for words it
        **match: Any,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.of(kind, **match)
            if len(found) >= count:
                return found[count - 1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"no {kind} {match} in {timeout}s; saw {[e['type'] for _, e in self.events]}"
                )
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except TimeoutError:
                pass

    def heard_audio(self) -> np.ndarray:
        return np.frombuffer(bytes(self.heard), "<i2").astype(np.float32) / 32768

    async def close(self) -> None:
        self.mic.stop()
        await self.pc.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class CallRefused(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
