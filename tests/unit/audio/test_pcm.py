"""PCM16 / float32 / base64 conversions: exact round trips and rejection of what is not audio."""

from __future__ import annotations

import base64

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.audio.pcm import (
    as_float32,
    b64_to_pcm16,
    b64decode,
    float32_to_b64,
    from_float32_bytes,
    from_pcm16,
    from_pcm16_into,
    pcm16_to_b64,
    to_float32_bytes,
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


def test_pcm16_base64_is_little_endian_and_rounded() -> None:
    raw = base64.b64decode(pcm16_to_b64(np.array([0.0, 1.0, -1.0, 0.5], np.float32)))
    assert np.frombuffer(raw, "<i2").tolist() == [0, 32767, -32767, 16384]


def test_int16_arrays_are_accepted_and_scaled() -> None:
    assert as_float32(np.array([16384, -32768], np.int16)).tolist() == [0.5, -1.0]


def test_float32_round_trip_is_exact() -> None:
    x = np.random.default_rng(1).normal(0, 0.5, 1000).astype(np.float32)
    assert np.array_equal(from_float32_bytes(b64decode(float32_to_b64(x))), x)


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


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.float32])
def test_any_float_dtype_becomes_float32(dtype) -> None:
    a = as_float32(np.array([0.5, -0.25, 2.0], dtype))
    assert a.dtype == np.float32 and a.tolist() == [0.5, -0.25, 2.0]  # no clipping here


def test_a_plain_list_of_floats_is_audio() -> None:
    assert as_float32([0.5, -0.5]).tolist() == [0.5, -0.5]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "audio",
    [
        np.array(0.5, np.float32),  # a scalar is not a clip
        np.zeros((1, 4), np.float32),  # even a single channel must be 1-D
        np.array([1, 2], np.int32),  # only int16 is a PCM integer type here
        np.array([1, 2], np.uint8),
        np.array([True, False]),
        np.array([1 + 1j]),
        np.array([0.0, -np.inf]),
    ],
)
def test_as_float32_rejects_what_is_not_mono_audio(audio: np.ndarray) -> None:
    with pytest.raises(InvalidAudio):
        as_float32(audio)


def test_known_wire_bytes() -> None:
    # 0.0 and +1.0 as little-endian PCM16: 00 00, ff 7f
    assert pcm16_to_b64(np.array([0.0, 1.0], np.float32)) == "AAD/fw=="
    assert float32_to_b64(np.array([1.0], np.float32)) == base64.b64encode(b"\x00\x00\x80\x3f").decode()
    assert from_float32_bytes(b"\x00\x00\x00\xbf").tolist() == [-0.5]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-32768, 32767), max_size=64))
def test_pcm16_to_float_and_back_moves_no_sample_by_more_than_one_step(values: list[int]) -> None:
    # decoding divides by 32768 and encoding multiplies by 32767 (so +1.0 is 32767 and -1.0 is
    # -32767, symmetric): a sample moves by v/32768 before rounding, so values up to about half
    # scale survive exactly and louder ones may lose one step
    data = np.array(values, "<i2").tobytes()
    back = np.frombuffer(to_pcm16(from_pcm16(data)), "<i2").astype(np.int32)
    v = np.array(values, np.int32)
    assert np.all(np.abs(back - v) <= 1)
    quiet = np.abs(v) <= 16000
    assert np.array_equal(back[quiet], v[quiet])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=64))
def test_float32_bytes_round_trip_exactly_without_clipping(values: list[float]) -> None:
    x = np.array(values, np.float32)
    assert np.array_equal(from_float32_bytes(to_float32_bytes(x)), x)
    assert np.array_equal(from_float32_bytes(b64decode(float32_to_b64(x))), x)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0, width=32), max_size=64))
def test_float_to_pcm16_and_back_is_within_one_step(values: list[float]) -> None:
    x = np.array(values, np.float32)
    y = from_pcm16(to_pcm16(x))
    assert np.all(np.abs(y - x) <= 1.5 / 32768)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_pcm16_decoders_take_any_bytes_like(kind) -> None:
    assert from_pcm16(kind(b"\x00\x40\x00\xc0")).tolist() == [0.5, -0.5]
    assert from_float32_bytes(kind(b"\x00\x00\x00\x3f")).tolist() == [0.5]


def test_odd_byte_counts_are_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        from_pcm16(b"\x00")
    for n in (1, 2, 3, 5):
        with pytest.raises(InvalidAudio):
            from_float32_bytes(b"\x00" * n)
    assert from_pcm16(b"").size == 0 and from_float32_bytes(b"").size == 0


@pytest.mark.parametrize("payload", ["AAAA\n", "AA AA", "ÄÖÜ=", None, 12, "AAA=A"])
def test_base64_is_strict(payload) -> None:
    with pytest.raises(InvalidAudio):
        b64decode(payload)


def test_base64_accepts_bytes_and_str() -> None:
    assert b64decode(b"AAD/fw==") == b64decode("AAD/fw==") == b"\x00\x00\xff\x7f"
    assert b64decode("") == b""


def test_non_finite_float32_payloads_are_invalid_audio() -> None:
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(InvalidAudio):
            from_float32_bytes(np.array([0.0, bad], "<f4").tobytes())
    with pytest.raises(InvalidAudio):
        float32_to_b64(np.array([np.nan], np.float32))


def test_every_pcm16_value_through_float_and_back() -> None:
    v = np.arange(-32768, 32768, dtype=np.int32)
    back = np.frombuffer(to_pcm16(from_pcm16(v.astype("<i2").tobytes())), "<i2").astype(np.int32)
    assert np.all(np.abs(back - v) <= 1)
    changed = v[back != v]
    assert np.abs(changed).min() > 16000  # measured: the first value that moves is 16369
    assert back[0] == -32767 and back[-1] == 32766  # full scale becomes the symmetric +-32767 range


@pytest.mark.parametrize("n", [0, 1, 7, 480, 961])
def test_pcm16_into_a_scratch_buffer_gives_the_samples_of_from_pcm16(n: int) -> None:
    data = np.random.default_rng(n).integers(-32768, 32768, n).astype("<i2").tobytes()
    scratch = np.full(1000, 9.0, np.float32)
    out = from_pcm16_into(data, scratch)
    assert out.dtype == np.float32 and np.array_equal(out, from_pcm16(data))
    assert out.base is scratch and (scratch[n:] == 9.0).all()  # no new array, the rest untouched


def test_pcm16_into_rejects_half_a_sample() -> None:
    with pytest.raises(InvalidAudio, match="even number of bytes"):
        from_pcm16_into(b"\x00\x01\x02", np.zeros(4, np.float32))


@pytest.mark.parametrize("text", ["QUJD", "QR==", "", "QUJDRA=="])
def test_b64decode_matches_the_standard_librarys_validated_decode(text: str) -> None:
    assert b64decode(text) == base64.b64decode(text, validate=True)


@pytest.mark.parametrize("text", ["QQ", "QQ=", "QQ==QQ==", "=QQ=", "QUJD\n", "QU JD", "QQ===", "é"])
def test_b64decode_rejects_what_the_validated_decode_rejects(text: str) -> None:
    with pytest.raises(InvalidAudio, match="not valid base64"):
        b64decode(text)
