"""A duplex session's input: ``audio_chunk`` messages -> checked 16 kHz audio and RGB frames.

Everything a client sends is checked here before any model sees it: base64, a whole number of
samples, no NaN, a bounded duration, and frames that are PNG or JPEG of bounded size. Audio at
another rate than 16 kHz goes through one stream resampler per session, so chunk edges make no
clicks. When units fall behind, waiting chunks are merged into one (``merge``): the next unit hears
all of their audio and sees their latest frames, and the result says it was ``lagging``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from omnivox.audio.clips import decode_clip_at
from omnivox.audio.pcm import b64decode, from_float32_bytes, from_pcm16
from omnivox.audio.resample import StreamResampler
from omnivox.core.errors import InvalidAudio
from omnivox.engines.duplex import INPUT_SAMPLE_RATE
from omnivox.protocol.duplex import AudioChunk
from omnivox.video.frames import decode_image_b64, image_format_b64


@dataclass
class Chunk:
    """One unit's worth of input (or several merged)."""

    audio: np.ndarray  # float32 mono at 16 kHz
    frames: list[np.ndarray] = field(default_factory=list)  # RGB uint8, oldest first
    force_listen: bool = False
    arrived: float = field(default_factory=time.monotonic)  # when the (first) chunk arrived
    merged: int = 1  # chunks this one stands for


@dataclass(frozen=True)
class InputLimits:
    max_chunk_ms: int  # the longest audio one message may carry
    max_frames: int  # frames kept per chunk (the latest ones)
    max_pixels: int  # per frame


class InputDecoder:
    """Decodes one session's ``audio_chunk`` messages (keeps the resampler state between them)."""

    def __init__(self, sample_rate: int, limits: InputLimits, see_frames: bool) -> None:
        self.sample_rate = sample_rate
        self.limits = limits
        self.see_frames = see_frames  # False: frames are checked by their header only, not decoded
        self._resampler = StreamResampler(sample_rate, INPUT_SAMPLE_RATE) if sample_rate != 16000 else None

    def audio(self, msg: AudioChunk) -> np.ndarray:
        """The chunk's audio at 16 kHz. Raises ``InvalidAudio`` for anything that is not audio."""
        raw = b64decode(msg.audio_base64)
        audio = from_float32_bytes(raw) if msg.format == "float32" else from_pcm16(raw)
        if not len(audio):
            raise InvalidAudio("audio_chunk carries no audio")
        ms = len(audio) * 1000 / self.sample_rate
        if ms > self.limits.max_chunk_ms:
            raise InvalidAudio(
                f"audio_chunk carries {ms:.0f} ms of audio; the limit is {self.limits.max_chunk_ms} ms",
                limit_ms=self.limits.max_chunk_ms,
            )
        if self._resampler is not None:
            audio = self._resampler.process(audio)
        return audio

    def frames(self, msg: AudioChunk) -> list[np.ndarray]:
        """The chunk's latest frames, decoded (or only checked when the engine does not see them)."""
        texts = (msg.frame_base64_list or [])[-self.limits.max_frames :]
        if not self.see_frames:
            for text in texts:
                image_format_b64(text)
            return []
        return [decode_image_b64(text, self.limits.max_pixels) for text in texts]


def decode_ref_audio(text: str, sample_rate: int) -> np.ndarray:
    """A reference voice clip: a WAV (its header gives the rate) or raw float32 at ``sample_rate``."""
    wav = text.startswith("UklGR")  # base64 of a RIFF header
    audio = decode_clip_at(text, "wav" if wav else "float32", sample_rate, INPUT_SAMPLE_RATE)
    if not len(audio):
        raise InvalidAudio("reference audio is empty")
    return audio


def merge(chunks: list[Chunk], max_samples: int) -> tuple[Chunk, int]:
    """Waiting chunks as one: all their audio (the newest ``max_samples`` of it), their latest
    frames, listening forced if any asked. Returns it and the samples dropped from the oldest."""
    if len(chunks) == 1 and len(chunks[0].audio) <= max_samples:
        return chunks[0], 0
    audio = np.concatenate([c.audio for c in chunks])
    dropped = max(0, len(audio) - max_samples)
    frames = next((c.frames for c in reversed(chunks) if c.frames), [])
    one = Chunk(
        audio=audio[dropped:],
        frames=frames,
        force_listen=any(c.force_listen for c in chunks),
        arrived=chunks[0].arrived,
        merged=sum(c.merged for c in chunks),
    )
    return one, dropped
