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

    def process_float32(self, chunk: np.ndarray) -> np.ndarray:
        """``process`` for a chunk a decoder made: 1-D, contiguous, finite float32 (not checked).

        Always a new array (the chunk may be the decoder's scratch buffer, reused next call). Per
        40 ms chunk on a busy event loop the checks and copies cost more than the filter does.
        """
        if self._stream is None:
            return chunk.copy()
        return self._stream.resample_chunk(chunk, last=False)

    def flush(self) -> np.ndarray:
        """End the stream: returns the held-back tail and resets for the next stream."""
        if self._stream is None:
            return np.zeros(0, np.float32)
        tail = self._stream.resample_chunk(np.zeros(0, np.float32), last=True)
        self.reset()
        return tail
