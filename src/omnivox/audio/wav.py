"""WAV read and write with the stdlib ``wave`` module and numpy.

Reads integer PCM WAV (8, 16, 24 or 32 bit, any channel count, mixed down to mono) from bytes, a
file object or a path; writes 16-bit mono PCM. A file that is not a WAV, is truncated, or has a
format ``wave`` cannot read (float WAV, compressed codecs) raises ``InvalidAudio``.
"""

from __future__ import annotations

import io
import os
import struct
import wave
from typing import BinaryIO

import numpy as np

from omnivox.audio.pcm import to_pcm16
from omnivox.core.errors import InvalidAudio

WavSource = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO


def _open(source: WavSource) -> BinaryIO:
    if isinstance(source, bytes | bytearray | memoryview):
        return io.BytesIO(bytes(source))
    if isinstance(source, str | os.PathLike):
        try:
            return open(source, "rb")  # closed by read_wav
        except OSError as exc:
            raise InvalidAudio(f"cannot open WAV file: {exc}") from None
    return source


def _samples(raw: bytes, width: int) -> np.ndarray:
    if width == 1:  # 8-bit WAV is unsigned
        return (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    if width == 3:  # no numpy int24: widen each sample to int32 with its sign in the top byte
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v & 0x800000, v - 0x1000000, v)
        return v.astype(np.float32) / 8388608.0
    if width == 4:
        return (np.frombuffer(raw, "<i4").astype(np.float64) / 2147483648.0).astype(np.float32)
    raise InvalidAudio(f"unsupported WAV sample width {width} bytes")


def read_wav(source: WavSource) -> tuple[np.ndarray, int]:
    """WAV bytes, file object or path -> (float32 mono samples, sample rate)."""
    f = _open(source)
    try:
        with wave.open(f, "rb") as w:
            channels, width, rate, frames = (
                w.getnchannels(),
                w.getsampwidth(),
                w.getframerate(),
                w.getnframes(),
            )
            raw = w.readframes(frames)
    except RuntimeError:
        # wave's chunk reader raises a bare RuntimeError when skipping a chunk would seek outside the
        # chunk that holds it: a chunk size larger than what is left of the RIFF container
        raise InvalidAudio(
            "not a readable PCM WAV: a chunk claims more bytes than its RIFF container holds "
            "(the header is corrupt or the file is truncated)"
        ) from None
    except (wave.Error, EOFError, ValueError, OSError, struct.error) as exc:
        detail = str(exc) or ("it ends before its header does" if isinstance(exc, EOFError) else repr(exc))
        raise InvalidAudio(f"not a readable PCM WAV: {detail}") from None
    finally:
        if f is not source:
            f.close()
    if channels < 1 or rate <= 0:
        raise InvalidAudio(f"WAV header is invalid ({channels} channels, {rate} Hz)")
    frame_bytes = channels * width
    if len(raw) < frames * frame_bytes:
        # the header promised more than the file holds: a truncated upload
        raise InvalidAudio(f"WAV data is truncated: {len(raw)} of {frames * frame_bytes} bytes")
    audio = _samples(raw[: frames * frame_bytes], width)
    if channels > 1:
        audio = audio.reshape(-1, channels).mean(axis=1).astype(np.float32)
    return audio, rate


def write_wav(audio: np.ndarray, sample_rate: int) -> bytes:
    """Float (or int16) mono samples -> 16-bit PCM WAV bytes."""
    if sample_rate <= 0:
        raise InvalidAudio(f"sample rate must be positive, got {sample_rate}")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(to_pcm16(audio))
    return buf.getvalue()


def write_wav_file(path: str | os.PathLike[str], audio: np.ndarray, sample_rate: int) -> None:
    """Write ``audio`` as a 16-bit mono PCM WAV file at ``path``."""
    data = write_wav(audio, sample_rate)
    with open(path, "wb") as f:
        f.write(data)
