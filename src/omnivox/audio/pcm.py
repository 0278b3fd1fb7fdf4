"""PCM sample formats: float32 arrays <-> little-endian PCM16 / float32 bytes <-> base64.

Inside omnivox audio is a 1-D float32 numpy array in [-1, 1]. On the wire it is PCM16 (the OpenAI
Realtime default and the MiniCPM-o demo's format) or raw float32, base64-encoded inside JSON. Every
decoder here checks its input and raises ``InvalidAudio`` for anything that is not audio, so a
client's bad message becomes a recoverable error instead of an exception deep in a model.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

from omnivox.core.errors import InvalidAudio

_PCM16 = np.dtype("<i2")
_F32 = np.dtype("<f4")


def as_float32(audio: np.ndarray) -> np.ndarray:
    """``audio`` as a 1-D float32 array (int16 is scaled to [-1, 1]); rejects anything else."""
    a = np.asarray(audio)
    if a.ndim != 1:
        raise InvalidAudio(f"audio must be mono (1-D), got shape {a.shape}")
    if a.dtype == np.int16:
        return a.astype(np.float32) / 32768.0
    if not np.issubdtype(a.dtype, np.floating):
        raise InvalidAudio(f"audio must be float or int16 samples, got {a.dtype}")
    a = a.astype(np.float32, copy=False)
    if not np.all(np.isfinite(a)):
        raise InvalidAudio("audio contains NaN or infinite samples")
    return a


def to_pcm16(audio: np.ndarray) -> bytes:
    """Float samples -> little-endian PCM16 bytes (clipped to [-1, 1])."""
    a = as_float32(audio)
    # 32767 rather than 32768 so +1.0 does not wrap to -32768
    return (np.clip(a, -1.0, 1.0) * 32767.0).round().astype(_PCM16).tobytes()


def from_pcm16(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Little-endian PCM16 bytes -> float32 samples in [-1, 1)."""
    if len(data) % 2:
        raise InvalidAudio(f"PCM16 data must have an even number of bytes, got {len(data)}")
    return np.frombuffer(data, dtype=_PCM16).astype(np.float32) / 32768.0


def to_float32_bytes(audio: np.ndarray) -> bytes:
    """Float samples -> little-endian float32 bytes (not clipped: float32 carries headroom)."""
    return as_float32(audio).astype(_F32, copy=False).tobytes()


def from_float32_bytes(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Little-endian float32 bytes -> float32 samples; NaN and infinities are rejected."""
    if len(data) % 4:
        raise InvalidAudio(f"float32 data must be a multiple of 4 bytes, got {len(data)}")
    a = np.frombuffer(data, dtype=_F32).astype(np.float32)
    if not np.all(np.isfinite(a)):
        raise InvalidAudio("float32 audio contains NaN or infinite samples")
    return a


def from_pcm16_into(data: bytes | bytearray | memoryview, scratch: np.ndarray) -> np.ndarray:
    """``from_pcm16`` written into ``scratch`` (float32, long enough): returns a view of it.

    For a caller that converts every chunk of a stream and only hands the samples on to something
    that copies them (a resampler): no new arrays per chunk. The next call overwrites the view.
    """
    if len(data) % 2:
        raise InvalidAudio(f"PCM16 data must have an even number of bytes, got {len(data)}")
    n = len(data) // 2
    out = scratch[:n]
    # times 2**-15 is exactly the division by 32768 (a power of two): the same samples
    np.multiply(np.frombuffer(data, dtype=_PCM16), np.float32(1 / 32768), out=out, casting="unsafe")
    return out


def b64decode(text: str | bytes) -> bytes:
    """Strict base64 (standard alphabet, padding checked); bad input is ``InvalidAudio``."""
    try:
        # strict mode checks the alphabet and padding in C (b64decode's validate runs a regex first)
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise InvalidAudio(f"audio is not valid base64: {exc}") from None


def pcm16_to_b64(audio: np.ndarray) -> str:
    """Float samples -> base64 of PCM16 (``input_audio_buffer.append`` / ``output_audio.delta``)."""
    return base64.b64encode(to_pcm16(audio)).decode("ascii")


def b64_to_pcm16(text: str | bytes) -> np.ndarray:
    """Base64 of PCM16 -> float32 samples."""
    return from_pcm16(b64decode(text))


def float32_to_b64(audio: np.ndarray) -> str:
    """Float samples -> base64 of little-endian float32."""
    return base64.b64encode(to_float32_bytes(audio)).decode("ascii")
