"""Resampling between the rates voice audio comes in (8 to 48 kHz) with soxr.

Telephony is 8 kHz, ASR and VAD models want 16 kHz, the TTS and the OpenAI Realtime PCM format are
24 kHz, Opus and browsers run at 48 kHz, and recordings are often 44.1 kHz (or its halves).
``resample`` converts a whole clip; ``StreamResampler`` converts a stream that arrives in chunks,
keeping the filter state between them so chunk edges make no clicks and the output equals (to float
rounding) what the one-shot call gives for the whole clip.
"""

from __future__ import annotations

import numpy as np
import soxr

from omnivox.audio.pcm import as_float32
from omnivox.core.errors import InvalidAudio

SUPPORTED_RATES: tuple[int, ...] = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
# "HQ" is soxr's default; voice does not need VHQ's extra cost
_QUALITY = "HQ"


def check_rate(rate: int) -> int:
    """``rate`` if omnivox converts from and to it, else ``InvalidAudio``."""
    if rate not in SUPPORTED_RATES:
        raise InvalidAudio(
            f"unsupported sample rate {rate}; use one of {', '.join(map(str, SUPPORTED_RATES))}",
            sample_rate=rate,
        )
    return rate


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """A whole clip of float (or int16) samples at ``src_rate`` -> float32 at ``dst_rate``."""
    check_rate(src_rate)
    check_rate(dst_rate)
    a = as_float32(audio)
    if src_rate == dst_rate or a.size == 0:
        return a.copy()
    return soxr.resample(a, src_rate, dst_rate, quality=_QUALITY).astype(np.float32, copy=False)


def resampled_length(samples: int, src_rate: int, dst_rate: int) -> int:
    """How many samples ``samples`` at ``src_rate`` become at ``dst_rate`` (what soxr returns).

    libsoxr ends a stream after ``(int64)(samples_in / io_ratio + .5)`` output samples, with
    ``io_ratio = src_rate / dst_rate`` in double precision: the nearest sample, ties settled by how the
    division rounds (360 at 24 kHz -> 661.5 -> 661 at 44.1 kHz, 160 at 8 kHz -> 220.5 -> 221 at
    11.025 kHz), which exact integer arithmetic would not reproduce. The same holds for the total of
    a ``StreamResampler`` stream, whatever its chunking, with ``samples`` the stream's total input.
    """
    if samples <= 0:
        return 0
    if src_rate == dst_rate:
        return samples
    return int(samples / (src_rate / dst_rate) + 0.5)


class StreamResampler:
    """Resample a chunked stream; ``process`` each chunk, ``flush`` at the end of the stream.

    soxr holds back a few milliseconds of output (its filter delay) until later input or the flush
    arrives, so a chunk's output can be shorter than the chunk; the total over the stream is exact.
    One instance is one stream: ``reset`` before reusing it for an unrelated one.
    """

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        self.src_rate = check_rate(src_rate)
        self.dst_rate = check_rate(dst_rate)
        self._stream: soxr.ResampleStream | None = None
        self.reset()

    @property
    def passthrough(self) -> bool:
        return self.src_rate == self.dst_rate

    def reset(self) -> None:
        """Drop buffered samples and filter state: the next chunk starts a new stream."""
        if self.passthrough:
            self._stream = None
        else:
            self._stream = soxr.ResampleStream(
                self.src_rate, self.dst_rate, 1, dtype="float32", quality=_QUALITY
            )

    def process(self, chunk: np.ndarray) -> np.ndarray:
        """Resample the next chunk; returns whatever output is ready (possibly empty)."""
        a = as_float32(chunk)
        if self._stream is None:
            return a.copy()
        return self._stream.resample_chunk(np.ascontiguousarray(a), last=False)

    def flush(self) -> np.ndarray:
        """End the stream: returns the held-back tail and resets for the next stream."""
        if self._stream is None:
            return np.zeros(0, np.float32)
        tail = self._stream.resample_chunk(np.zeros(0, np.float32), last=True)
        self.reset()
        return tail
