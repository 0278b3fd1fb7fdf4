"""One speaker's audio as it arrives -> chunks placed on the session's clock.

Placement follows what a listener on the client heard:

- the user's live audio (a microphone streamed in pieces) was captured just before it arrived, so a
  piece ends where it arrived, and never overlaps the piece before it (pieces that arrive bunched up
  were still spoken one after the other);
- the assistant's audio is played from when it arrives, after whatever was still queued to play;
  a barge-in (``cut``) drops what was queued past that moment, as clients do;
- a clip (a whole recording sent at once, a turn-based question) ended when it arrived.

Pieces of one continuous stretch are joined into chunks of about ``chunk_s`` (a microphone sending
every 20 ms must not make 50 files a second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from omnivox.audio.g711 import alaw_decode, ulaw_decode
from omnivox.audio.opus import OpusDecoder
from omnivox.audio.pcm import from_float32_bytes, from_pcm16
from omnivox.audio.wav import read_wav
from omnivox.core.errors import OmnivoxError
from omnivox.protocol.timelines.reader import Audio

_JOIN_TOLERANCE_S = 0.002  # pieces closer than this are one continuous stretch


@dataclass
class TrackChunk:
    """Audio ready to be written: where it goes on the session's clock."""

    role: str
    samples: np.ndarray  # float32 mono
    sample_rate: int
    start: float  # seconds on the session's clock
    t: float  # when its first piece arrived
    stream_pos: float | None = None  # user live audio: seconds of the user's stream before it

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate


def _stateless(decode: Callable[[bytes], np.ndarray], width: int) -> Callable[[bytes], np.ndarray]:
    def run(data: bytes) -> np.ndarray:
        return decode(data[: len(data) - len(data) % width])

    return run


_DECODERS: dict[str, Callable[[bytes], np.ndarray]] = {
    "pcm16": _stateless(from_pcm16, 2),
    "float32": _stateless(from_float32_bytes, 4),
    "pcmu": ulaw_decode,
    "pcma": alaw_decode,
}


@dataclass
class Track:
    role: str
    chunk_s: float = 1.0
    cursor: float = 0.0  # where this speaker's next live audio goes
    stream_s: float = 0.0  # seconds of live audio heard so far (the user's stream clock)
    _parts: list[np.ndarray] = field(default_factory=list)
    _rate: int = 0
    _start: float = 0.0
    _t: float = 0.0
    _pos: float = 0.0
    _samples: int = 0
    _opus: dict[str, OpusDecoder] = field(default_factory=dict)

    def decode(self, audio: Audio) -> tuple[np.ndarray, int] | None:
        """The piece as float32 samples and their rate (None: nothing audible could be read)."""
        try:
            if audio.encoding == "wav":
                samples, rate = read_wav(audio.data)
            elif audio.encoding == "ogg_opus":
                decoder = self._opus.get(audio.stream)
                if decoder is None:
                    decoder = self._opus[audio.stream] = OpusDecoder(24000)
                samples, rate = decoder.decode(audio.data), 24000
            else:
                samples, rate = _DECODERS[audio.encoding](audio.data), audio.sample_rate
        except (OmnivoxError, ValueError, KeyError, EOFError):
            return None
        if not len(samples) or not 8000 <= rate <= 48000:
            return None
        samples = np.asarray(samples, np.float32).reshape(-1)
        if audio.encoding == "float32":  # (finite: the decoder refuses NaN) the only one past full scale
            samples = np.clip(samples, -1.0, 1.0)
        return samples, rate

    def add(self, t: float, audio: Audio) -> list[TrackChunk]:
        """Place one piece that arrived at ``t``; returns the chunks now complete."""
        decoded = self.decode(audio)
        if decoded is None:
            return []
        samples, rate = decoded
        duration = len(samples) / rate
        if audio.clip:
            return [*self.flush(), TrackChunk(self.role, samples, rate, max(0.0, t - duration), t)]
        start = max(self.cursor, t - duration) if self.role == "user" else max(self.cursor, t)
        done: list[TrackChunk] = []
        if self._parts and (rate != self._rate or abs(start - self._end()) > _JOIN_TOLERANCE_S):
            done = self.flush()
        if not self._parts:
            self._rate, self._start, self._t, self._pos = rate, start, t, self.stream_s
        self._parts.append(samples)
        self._samples += len(samples)
        self.cursor = start + duration
        self.stream_s += duration
        if self._samples >= self.chunk_s * rate:
            done += self.flush()
        return done

    def flush(self) -> list[TrackChunk]:
        """What is buffered, as one chunk (none if nothing is)."""
        if not self._parts:
            return []
        samples = np.concatenate(self._parts)
        pos = self._pos if self.role == "user" else None
        self._parts, self._samples = [], 0
        return [TrackChunk(self.role, samples, self._rate, self._start, self._t, pos)]

    def cut(self, t: float) -> list[TrackChunk]:
        """A barge-in at ``t``: what was queued past it is not heard; the next audio starts fresh."""
        done = self.flush()
        self.cursor = min(self.cursor, t)
        self._opus.clear()
        return done

    def _end(self) -> float:
        return self._start + self._samples / self._rate


def voiced_spans(samples: np.ndarray, rate: int, threshold: float = 0.01) -> list[tuple[float, float]]:
    """Stretches (seconds from the chunk's start) where the audio is louder than ``threshold`` RMS,
    in 30 ms frames: what the recording calls speech when the protocol does not say."""
    frame = max(1, int(rate * 0.03))
    n = len(samples) // frame
    if n == 0:
        return []
    rms = np.sqrt(np.mean(samples[: n * frame].reshape(n, frame) ** 2, axis=1))
    loud = rms > threshold
    spans: list[tuple[float, float]] = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], loud.astype(np.int8), [0]])))
    for begin, end in zip(edges[::2], edges[1::2], strict=True):
        spans.append((round(begin * frame / rate, 3), round(end * frame / rate, 3)))
    return spans
