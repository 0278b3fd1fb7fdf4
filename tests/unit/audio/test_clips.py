"""Audio clips inside JSON messages: base64 pcm16 / float32 / wav -> samples, one error for bad input."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from omnivox.audio.clips import decode_clip, decode_clip_at
from omnivox.audio.pcm import float32_to_b64, pcm16_to_b64
from omnivox.audio.resample import resample
from omnivox.audio.wav import write_wav
from omnivox.core.errors import InvalidAudio


def tone(rate: int, seconds: float = 0.25) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_pcm16_clip_takes_the_given_rate() -> None:
    x = tone(16000)
    audio, rate = decode_clip(pcm16_to_b64(x), "pcm16", 16000)
    assert rate == 16000 and audio.dtype == np.float32
    assert np.max(np.abs(audio - x)) <= 1.5 / 32768


def test_float32_clip_is_exact_and_takes_the_given_rate() -> None:
    x = tone(24000) * 2  # float32 carries headroom: nothing is clipped
    audio, rate = decode_clip(float32_to_b64(x), "float32", 24000)
    assert rate == 24000 and np.array_equal(audio, x)


def test_wav_clip_takes_its_own_rate_not_the_given_one() -> None:
    x = tone(8000)
    audio, rate = decode_clip(b64(write_wav(x, 8000)), "wav", 16000)
    assert rate == 8000 and len(audio) == len(x)


def test_decode_clip_at_resamples_to_the_target() -> None:
    x = tone(8000)
    wav = b64(write_wav(x, 8000))
    audio = decode_clip_at(wav, "wav", 44100, 16000)
    assert len(audio) == 2 * len(x)
    assert np.allclose(audio, resample(decode_clip(wav, "wav", 0)[0], 8000, 16000))
    same = decode_clip_at(pcm16_to_b64(x), "pcm16", 8000, 8000)
    assert len(same) == len(x)


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ("not base64 at all!", "pcm16"),
        (b64(b"\x00\x01\x02"), "pcm16"),  # odd number of bytes
        (b64(b"\x00" * 6), "float32"),  # not whole float32 samples
        (b64(np.array([np.nan], "<f4").tobytes()), "float32"),
        (b64(b"just some text, not a RIFF file"), "wav"),
        (b64(write_wav(np.zeros(100, np.float32), 16000)[:60]), "wav"),  # truncated upload
    ],
)
def test_bad_clips_are_invalid_audio(data: str, fmt) -> None:
    with pytest.raises(InvalidAudio):
        decode_clip(data, fmt, 16000)


def test_an_unsupported_rate_is_invalid_audio() -> None:
    x = pcm16_to_b64(tone(16000))
    with pytest.raises(InvalidAudio):
        decode_clip_at(x, "pcm16", 12345, 16000)
    with pytest.raises(InvalidAudio):
        decode_clip_at(x, "pcm16", 16000, 96000)
    with pytest.raises(InvalidAudio):  # the WAV's own rate counts, whatever the message says
        decode_clip_at(b64(write_wav(tone(16000), 12000)), "wav", 16000, 16000)


def test_an_empty_clip_is_empty_audio() -> None:
    for fmt in ("pcm16", "float32"):
        audio, rate = decode_clip("", fmt, 16000)
        assert audio.shape == (0,) and rate == 16000
    assert decode_clip_at("", "pcm16", 8000, 24000).shape == (0,)
