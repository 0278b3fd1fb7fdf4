"""G.711 mu-law and A-law (ITU-T G.711), vectorised with numpy.

The OpenAI Realtime API offers ``g711_ulaw`` and ``g711_alaw`` (8 kHz telephony). Encoding follows
the reference ``g711.c`` (Sun Microsystems, public domain) bit for bit; decoding is a 256-entry table
built from the same reference, so every byte string decodes (G.711 has no invalid codes) and only
wrong types or shapes raise ``InvalidAudio``.
"""

from __future__ import annotations

import numpy as np

from omnivox.audio.pcm import as_float32
from omnivox.core.errors import InvalidAudio

# segment end points of the reference encoder (14-bit magnitudes for mu-law, 13-bit for A-law)
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)
_ULAW_BIAS = 0x84
_ULAW_CLIP = 8159


def _to_int16(audio: np.ndarray) -> np.ndarray:
    a = np.asarray(audio)
    if a.ndim == 1 and a.dtype == np.int16:
        return a.astype(np.int32)
    f = as_float32(a)
    return (np.clip(f, -1.0, 32767 / 32768) * 32768.0).round().astype(np.int32)


def _as_codes(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise InvalidAudio(f"G.711 codes must be 1-D uint8, got {data.dtype} {data.shape}")
        return data
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidAudio(f"G.711 data must be bytes, got {type(data).__name__}")
    return np.frombuffer(data, dtype=np.uint8)


def ulaw_encode(audio: np.ndarray) -> bytes:
    """Float (or int16) samples -> mu-law bytes, one per sample."""
    pcm = _to_int16(audio) >> 2  # the reference works on 14-bit magnitudes
    negative = pcm < 0
    mag = np.where(negative, -pcm, pcm)
    mask = np.where(negative, 0x7F, 0xFF)
    mag = np.minimum(mag, _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, mag, side="left")  # first end point >= mag
    code = (seg << 4) | ((mag >> (seg + 1)) & 0x0F)
    code = np.where(seg >= 8, 0x7F, code)
    return (code ^ mask).astype(np.uint8).tobytes()


def _ulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = ((u & 0x0F) << 3) + _ULAW_BIAS
    t <<= (u & 0x70) >> 4
    return np.where(u & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def alaw_encode(audio: np.ndarray) -> bytes:
    """Float (or int16) samples -> A-law bytes, one per sample."""
    pcm = _to_int16(audio) >> 3  # the reference works on 13-bit magnitudes
    negative = pcm < 0
    mask = np.where(negative, 0x55, 0xD5)
    mag = np.where(negative, -pcm - 1, pcm)
    seg = np.searchsorted(_ALAW_SEG_END, mag, side="left")
    shift = np.where(seg < 2, 1, seg)
    code = (np.minimum(seg, 7) << 4) | ((mag >> shift) & 0x0F)
    code = np.where(seg >= 8, 0x7F, code)
    return (code ^ mask).astype(np.uint8).tobytes()


def _alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    t = np.where(seg == 0, t + 8, t + 0x108)
    t = np.where(seg > 1, t << np.maximum(seg - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


_ULAW_DECODE = _ulaw_table()
_ALAW_DECODE = _alaw_table()


def ulaw_decode_int16(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """mu-law bytes -> int16 samples (exactly the reference decoder's output)."""
    return _ULAW_DECODE[_as_codes(data)]


def alaw_decode_int16(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """A-law bytes -> int16 samples (exactly the reference decoder's output)."""
    return _ALAW_DECODE[_as_codes(data)]


def ulaw_decode(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """mu-law bytes -> float32 samples in [-1, 1)."""
    return ulaw_decode_int16(data).astype(np.float32) / 32768.0


def alaw_decode(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """A-law bytes -> float32 samples in [-1, 1)."""
    return alaw_decode_int16(data).astype(np.float32) / 32768.0
