"""A WebRTC call's audio: the caller's Opus track in, the session's replies out on a track of ours.

``WebRtcPlayout`` is the outgoing track. aiortc pulls a 20 ms frame from it in real time and encodes it
as Opus; it plays what the session sent, silence when there is nothing or while the session holds
the reply (speech over it, not judged yet: ``pause`` until ``resume`` or a cut), and reports when a
response's audio starts playing and when all of it has played (``on_playback``). The worker paces
its audio a little ahead of real time (``audio_lead_ms``), so the buffer here stays short and a cut
(barge-in, ``output_audio_buffer.clear``) drops little.

``hear`` reads the caller's track (aiortc decodes it to 48 kHz stereo) and hands the session PCM16
mono at its rate in ``CHUNK_MS`` pieces.
"""

from __future__ import annotations

import asyncio
import fractions
import time
from collections import deque
from collections.abc import Callable

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

FRAME_MS = 20  # what aiortc sends per RTP packet
CHUNK_MS = 40  # microphone audio per event to the worker

OnPlayback = Callable[[str, str], None]  # (started | stopped, response id)


class WebRtcPlayout(MediaStreamTrack):
    kind = "audio"

    def __init__(
        self, rate: int, on_playback: OnPlayback, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.rate = rate
        self.on_playback = on_playback
        self.clock = clock
        self._frame_bytes = rate * FRAME_MS // 1000 * 2
        self._chunks: deque[tuple[str | None, bytes]] = deque()
        self.buffered = 0  # bytes waiting to play
        self.playing: str | None = None  # the response whose audio is playing (started, not stopped)
        self._over: set[str] = set()  # responses that send no more audio
        self._cut: set[str] = set()  # responses whose audio was cleared: late deltas are dropped
        self._start: float | None = None
        self._pts = 0
        self.played_ms = 0.0  # reply audio played so far (not silence)
        self.paused = False  # the session holds the reply: silence until it resumes or cuts it

    def push(self, response_id: str | None, pcm: bytes) -> None:
        if response_id in self._cut or not pcm:
            return
        self._chunks.append((response_id, pcm))
        self.buffered += len(pcm)

    def audio_over(self, response_id: str) -> None:
        """``response_id`` sends no more audio: once the rest has played, it has ``stopped``."""
        self._over.add(response_id)
        if self.playing == response_id and not self.buffered:
            self._stopped()

    def pause(self) -> None:
        """Hold the reply where it is (what was not played yet waits, unheard)."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def clear(self, response_id: str | None = None) -> str | None:
        """Drop the audio not played yet; returns the response that was playing, if one was."""
        if response_id is not None:
            self._cut.add(response_id)
        self._chunks.clear()
        self.buffered = 0
        self.paused = False  # (a held reply that was cut: the next one plays)
        playing, self.playing = self.playing, None
        if playing is not None:
            self._cut.add(playing)
        return playing

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        samples = self._frame_bytes // 2
        if self._start is None:
            self._start = self.clock()
        else:
            wait = self._start + self._pts / self.rate - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
        pcm = self._take()
        frame = av.AudioFrame.from_ndarray(
            np.frombuffer(pcm, "<i2").reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self.rate
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, self.rate)
        self._pts += samples
        return frame

    def _take(self) -> bytes:
        """The next frame's PCM: queued reply audio, silence after it (or while it is held)."""
        if self.paused:
            return bytes(self._frame_bytes)
        out = bytearray()
        while len(out) < self._frame_bytes and self._chunks:
            rid, pcm = self._chunks[0]
            if rid is not None and rid != self.playing:
                if self.playing is not None:
                    self._stopped()
                self.playing = rid
                self.on_playback("started", rid)
            need = self._frame_bytes - len(out)
            out += pcm[:need]
            if len(pcm) > need:
                self._chunks[0] = (rid, pcm[need:])
            else:
                self._chunks.popleft()
        self.buffered -= len(out)
        self.played_ms += len(out) / 2 * 1000 / self.rate
        if not self._chunks and self.playing in self._over:
            self._stopped()
        return bytes(out) + bytes(self._frame_bytes - len(out))

    def _stopped(self) -> None:
        playing, self.playing = self.playing, None
        if playing is not None:
            self._over.discard(playing)
            self.on_playback("stopped", playing)


async def hear(track: MediaStreamTrack, rate: int, deliver: Callable[[bytes], None]) -> None:
    """Read the caller's audio until the track ends, delivering PCM16 mono at ``rate``."""
    resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
    chunk = rate * CHUNK_MS // 1000 * 2
    held = bytearray()
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            break
        if not isinstance(frame, av.AudioFrame):  # an audio track gives audio frames
            continue
        for out in resampler.resample(frame):
            held += out.to_ndarray().astype("<i2").tobytes()
        while len(held) >= chunk:
            deliver(bytes(held[:chunk]))
            del held[:chunk]
