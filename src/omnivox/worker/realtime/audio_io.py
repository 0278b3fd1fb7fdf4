"""Realtime audio on the wire <-> audio in the voice stack.

Input: base64 chunks in the session's input format (PCM16 at its rate, G.711 mu-law or A-law at
8 kHz, Ogg-Opus at 24 kHz) -> float32 at 16 kHz, one continuous stream (the resampler keeps its state
across chunks). Output: the TTS's 24 kHz float32 -> base64 deltas in the output format; an Ogg-Opus
output is one stream per response (headers in its first delta).
"""

from __future__ import annotations

import base64

import numpy as np

from omnivox.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode
from omnivox.audio.halfband import HalfBandUpsampler
from omnivox.audio.opus import OpusDecoder, OpusEncoder
from omnivox.audio.pcm import b64decode, from_pcm16_into, to_pcm16
from omnivox.audio.resample import StreamResampler
from omnivox.core.errors import InvalidAudio
from omnivox.protocol.realtime.session_config import AudioFormat

TTS_RATE = 24000
# a stream may start mid-page (its head is skipped), but this much data without a page is not Opus
_OPUS_SEARCH_BYTES = 16 * 1024
# the stateless formats: wire bytes -> float32 (PCM16 has its own path in decode), float32 -> wire
# bytes (Ogg-Opus keeps stream state)
_DECODE = {"audio/pcmu": ulaw_decode, "audio/pcma": alaw_decode}
_ENCODE = {"audio/pcm": to_pcm16, "audio/pcmu": ulaw_encode, "audio/pcma": alaw_encode}


class InputDecoder:
    """Wire chunks -> float32 at ``target_rate``."""

    def __init__(self, fmt: AudioFormat, target_rate: int) -> None:
        self.format = fmt
        self.target_rate = target_rate
        self._opus = OpusDecoder(24000) if fmt.type == "audio/opus" else None
        # a phone line's 8 kHz is heard 4 ms behind by the half-band interpolator, where soxr's
        # blocks hold back 12-115 ms (docs/benchmarks.md, "Conversation quality, round six")
        self._resampler: StreamResampler | HalfBandUpsampler = (
            HalfBandUpsampler()
            if (fmt.rate, target_rate) == (8000, 16000)
            else StreamResampler(fmt.rate, target_rate)
        )
        # PCM16 chunks are converted into this (grown to the longest chunk) and resampled from it
        self._scratch = np.zeros(0, np.float32)

    def decode(self, b64: str) -> np.ndarray:
        """One ``input_audio_buffer.append`` payload; raises ``InvalidAudio`` on bad data."""
        raw = b64decode(b64)
        if self.format.type == "audio/pcm":
            # the common format, once per 20-100 ms per session on the event loop: no checks
            # that cannot fail (int16 samples are finite) and no new arrays but the output
            if len(raw) // 2 > len(self._scratch):
                self._scratch = np.zeros(len(raw) // 2, np.float32)
            return self._resampler.process_float32(from_pcm16_into(raw, self._scratch))
        if self._opus is None:
            return self._resampler.process(_DECODE[self.format.type](raw))
        audio = self._opus.decode(raw)
        if self._opus.pages == 0 and self._opus.skipped_bytes > _OPUS_SEARCH_BYTES:
            self._opus.reset()
            raise InvalidAudio(f"no Ogg-Opus page in the first {_OPUS_SEARCH_BYTES} bytes: is this Opus?")
        return self._resampler.process(audio)


class OutputEncoder:
    """24 kHz float32 -> base64 deltas in ``fmt``; ``flush`` at the end of each response."""

    def __init__(self, fmt: AudioFormat) -> None:
        self.format = fmt
        out_rate = 8000 if fmt.type in ("audio/pcmu", "audio/pcma") else fmt.rate
        self._resampler = StreamResampler(TTS_RATE, out_rate)
        self._opus = OpusEncoder(24000) if fmt.type == "audio/opus" else None

    def encode(self, audio: np.ndarray) -> str:
        if self._resampler.passthrough:
            # the output rate is the TTS's (24 kHz PCM16, Opus): the encoders check the samples
            # and copy nothing they do not change, so the pass-through's checked copy is skipped
            return _b64(self._bytes(audio))
        return _b64(self._bytes(self._resampler.process(audio)))

    def flush(self) -> str:
        """The held-back tail of this response's audio ("" if none); the next response starts fresh."""
        tail = self._bytes(self._resampler.flush())
        if self._opus is not None:
            tail += self._opus.flush()
            self._opus.reset()
        return _b64(tail)

    def _bytes(self, audio: np.ndarray) -> bytes:
        if self._opus is None:
            return _ENCODE[self.format.type](audio)
        return self._opus.encode(audio) if len(audio) else b""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
