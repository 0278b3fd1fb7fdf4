"""PCM16 / float32 / base64 conversions: exact round trips and rejection of what is not audio."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from omnivox.audio.pcm import (
    as_float32,
    b64_to_float32,
    b64_to_pcm16,
    b64decode,
    duration_ms,
    float32_to_b64,
    from_float32_bytes,
    from_pcm16,
    pcm16_to_b64,
    to_pcm16,
)
from omnivox.core.errors import InvalidAudio


def test_pcm16_round_trip_is_within_one_quantisation_step() -> None:
    x = np.random.default_rng(0).uniform(-1, 1, 4800).astype(np.float32)
    y = b64_to_pcm16(pcm16_to_b64(x))
    assert y.dtype == np.float32 and y.shape == x.shape
    assert np.max(np.abs(y - x)) <= 1.5 / 32768


def test_pcm16_bytes_are_little_endian_and_clipped() -> None:
    data = to_pcm16(np.array([0.0, 1.0, -1.0, 2.0, -3.0], np.float32))
    assert np.frombuffer(data, "<i2").tolist() == [0, 32767, -32767, 32767, -32767]
    assert from_pcm16(b"\x00\x80\xff\x7f").tolist() == [-1.0, 32767 / 32768]


def test_int16_arrays_are_accepted_and_scaled() -> None:
    assert as_float32(np.array([16384, -32768], np.int16)).tolist() == [0.5, -1.0]


def test_float32_round_trip_is_exact() -> None:
    x = np.random.default_rng(1).normal(0, 0.5, 1000).astype(np.float32)
    assert np.array_equal(b64_to_float32(float32_to_b64(x)), x)


def test_empty_audio_round_trips() -> None:
    assert b64_to_pcm16(pcm16_to_b64(np.zeros(0, np.float32))).size == 0


@pytest.mark.parametrize(
    "payload",
    ["not base64!!", "AAA", base64.b64encode(b"\x01\x02\x03").decode()],  # bad chars, bad padding, odd bytes
)
def test_bad_pcm16_payloads_raise_invalid_audio(payload: str) -> None:
    with pytest.raises(InvalidAudio):
        b64_to_pcm16(payload)


def test_float32_payloads_must_be_whole_finite_samples() -> None:
    with pytest.raises(InvalidAudio):
        from_float32_bytes(b"\x00" * 6)
    with pytest.raises(InvalidAudio):
        from_float32_bytes(np.array([0.0, np.nan], "<f4").tobytes())


@pytest.mark.parametrize(
    "audio",
    [np.zeros((2, 10), np.float32), np.array(["a", "b"]), np.array([0.0, np.inf], np.float32)],
)
def test_non_audio_arrays_are_rejected(audio: np.ndarray) -> None:
    with pytest.raises(InvalidAudio):
        to_pcm16(audio)


def test_invalid_audio_is_a_recoverable_error_with_a_code() -> None:
    with pytest.raises(InvalidAudio) as info:
        b64decode("%%%")
    assert info.value.code == "invalid_audio" and not info.value.fatal


def test_duration() -> None:
    assert duration_ms(480, 24000) == 20.0
