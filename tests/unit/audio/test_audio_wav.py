"""WAV read/write: round trips across sample widths and channel counts, and damaged files."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest

from omnivox.audio.wav import read_wav, write_wav, write_wav_file
from omnivox.core.errors import InvalidAudio


def raw_wav(samples: np.ndarray, width: int, channels: int, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return buf.getvalue()


def test_write_then_read_round_trips() -> None:
    x = np.random.default_rng(0).uniform(-0.9, 0.9, 2400).astype(np.float32)
    y, rate = read_wav(write_wav(x, 24000))
    assert rate == 24000 and y.dtype == np.float32
    assert np.max(np.abs(y - x)) < 1.5 / 32768


def test_file_round_trip(tmp_path) -> None:
    path = tmp_path / "a.wav"
    write_wav_file(path, np.full(100, 0.25, np.float32), 8000)
    y, rate = read_wav(path)
    assert rate == 8000 and np.allclose(y, 0.25, atol=1e-4)


def test_widths_and_stereo_are_read_as_mono_floats() -> None:
    # 8-bit is unsigned around 128; 24-bit little-endian with sign in the top byte
    assert read_wav(raw_wav(np.array([128, 192, 0], np.uint8), 1, 1))[0].tolist() == [0.0, 0.5, -1.0]
    s24 = bytes([0, 0, 0x40, 0, 0, 0xC0])  # +0.5, -0.5
    y24, _ = read_wav(raw_wav(np.frombuffer(s24, np.uint8), 3, 1))
    assert y24.tolist() == [0.5, -0.5]
    y32, _ = read_wav(raw_wav(np.array([1 << 30], "<i4"), 4, 1))
    assert y32.tolist() == [0.5]
    stereo = np.array([16384, -16384, 8192, 8192], "<i2")  # (0.5, -0.5) (0.25, 0.25)
    assert read_wav(raw_wav(stereo, 2, 2))[0].tolist() == [0.0, 0.25]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"RIFF\x00\x00\x00\x00WAVE",
        b"not a wav file at all, just text" * 4,
        raw_wav(np.zeros(100, "<i2"), 2, 1)[:30],  # header cut short
    ],
)
def test_damaged_files_are_invalid_audio(data: bytes) -> None:
    with pytest.raises(InvalidAudio):
        read_wav(data)


def test_truncated_data_chunk_is_invalid_audio() -> None:
    good = raw_wav(np.zeros(1000, "<i2"), 2, 1)
    with pytest.raises(InvalidAudio):
        read_wav(good[:-500])


def test_missing_file_is_invalid_audio(tmp_path) -> None:
    with pytest.raises(InvalidAudio):
        read_wav(tmp_path / "missing.wav")
