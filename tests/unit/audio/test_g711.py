"""G.711: bit-exact against the reference algorithm, and sound round trips."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.g711 import (
    alaw_decode,
    alaw_decode_int16,
    alaw_encode,
    ulaw_decode,
    ulaw_decode_int16,
    ulaw_encode,
)
from omnivox.core.errors import InvalidAudio

ALL_CODES = bytes(range(256))
ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)


def test_every_code_survives_decode_then_encode() -> None:
    # mu-law has two zeros (0x7F is "-0"); every other code maps back to itself, A-law has no duplicates
    u = ulaw_encode(ulaw_decode_int16(ALL_CODES))
    assert [i for i in range(256) if u[i] != i] == [0x7F]
    assert alaw_encode(alaw_decode_int16(ALL_CODES)) == ALL_CODES


def test_reference_values() -> None:
    # silence and full scale either side, as in the ITU tables
    assert ulaw_encode(np.array([0, 32767, -32768], np.int16)) == bytes([0xFF, 0x80, 0x00])
    assert alaw_encode(np.array([0, 32767, -32768], np.int16)) == bytes([0xD5, 0xAA, 0x2A])
    assert ulaw_decode_int16(b"\x80\x00").tolist() == [32124, -32124]
    assert alaw_decode_int16(b"\xaa\x2a").tolist() == [32256, -32256]


def test_matches_stdlib_audioop_when_available() -> None:
    audioop = pytest.importorskip("audioop")  # removed in Python 3.13
    pcm = ALL_INT16.tobytes()
    assert ulaw_encode(ALL_INT16) == audioop.lin2ulaw(pcm, 2)
    assert alaw_encode(ALL_INT16) == audioop.lin2alaw(pcm, 2)
    assert ulaw_decode_int16(ALL_CODES).tobytes() == audioop.ulaw2lin(ALL_CODES, 2)
    assert alaw_decode_int16(ALL_CODES).tobytes() == audioop.alaw2lin(ALL_CODES, 2)


@pytest.mark.parametrize(("encode", "decode"), [(ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)])
def test_speech_band_signal_round_trips_at_telephone_quality(encode, decode) -> None:
    t = np.arange(8000) / 8000
    x = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 1300 * t)).astype(np.float32)
    data = encode(x)
    assert len(data) == len(x)  # one byte per sample
    y = decode(data)
    snr = 10 * np.log10(np.sum(x**2) / np.sum((y - x) ** 2))
    assert snr > 30  # G.711 gives ~38 dB on a loud signal


def test_wrong_input_types_are_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        ulaw_decode("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidAudio):
        alaw_decode(np.zeros(4, np.int16))
    with pytest.raises(InvalidAudio):
        ulaw_encode(np.zeros((2, 2), np.float32))


CODECS = [
    pytest.param(ulaw_encode, ulaw_decode_int16, ulaw_decode, id="ulaw"),
    pytest.param(alaw_encode, alaw_decode_int16, alaw_decode, id="alaw"),
]


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_empty_input_gives_empty_output(encode, decode_int16, decode) -> None:
    assert encode(np.zeros(0, np.float32)) == b""
    assert encode(np.zeros(0, np.int16)) == b""
    assert decode_int16(b"").shape == (0,) and decode_int16(b"").dtype == np.int16
    assert decode(b"").shape == (0,) and decode(b"").dtype == np.float32


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_float_and_int16_inputs_give_the_same_codes(encode, decode_int16, decode) -> None:
    # float x means int16 round(x * 32768): every int16 value has an exact float32 twin
    assert encode(ALL_INT16.astype(np.float32) / 32768.0) == encode(ALL_INT16)
    assert encode(ALL_INT16.astype(np.float64) / 32768.0) == encode(ALL_INT16)


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_out_of_range_floats_clip_to_full_scale(encode, decode_int16, decode) -> None:
    assert encode(np.array([2.0, 1.0, 1e9], np.float32)) == encode(np.array([32767] * 3, np.int16))
    assert encode(np.array([-2.0, -1.0, -1e9], np.float32)) == encode(np.array([-32768] * 3, np.int16))


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_codes_are_sign_symmetric(encode, decode_int16, decode) -> None:
    # the top bit of a (de-masked) code is the sign: flipping it negates the value
    values = decode_int16(ALL_CODES).astype(np.int32)
    flipped = decode_int16(bytes(c ^ 0x80 for c in range(256))).astype(np.int32)
    assert np.array_equal(values, -flipped)


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_encoding_is_monotonic_and_idempotent(encode, decode_int16, decode) -> None:
    codes = encode(ALL_INT16)
    levels = decode_int16(codes).astype(np.int32)
    assert np.all(np.diff(levels) >= 0)  # a louder input never decodes quieter
    assert encode(decode_int16(codes)) == codes  # each decoded level lies in its own code's bin


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_quantisation_error_is_logarithmic(encode, decode_int16, decode) -> None:
    # 16 steps per segment: the error grows with the magnitude (about 1/32 of it, half a step),
    # plus a constant near zero; beyond the top level it is clipping (32124 / 32256)
    x = ALL_INT16.astype(np.int32)
    err = np.abs(decode_int16(encode(ALL_INT16)).astype(np.int32) - x)
    inside = np.abs(x) <= 32000
    assert np.all(err[inside] <= np.abs(x[inside]) / 32 + 8)
    assert err.max() <= 644


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_float_decode_is_the_int16_table_scaled(encode, decode_int16, decode) -> None:
    y = decode(ALL_CODES)
    assert y.dtype == np.float32 and np.all(y >= -1.0) and np.all(y < 1.0)
    assert np.array_equal(y * 32768.0, decode_int16(ALL_CODES).astype(np.float32))


@pytest.mark.parametrize(("encode", "decode_int16", "decode"), CODECS)
def test_every_bytes_like_input_decodes_alike(encode, decode_int16, decode) -> None:
    ref = decode_int16(ALL_CODES)
    for data in (bytearray(ALL_CODES), memoryview(ALL_CODES), np.frombuffer(ALL_CODES, np.uint8)):
        assert np.array_equal(decode_int16(data), ref)


def test_silence_codes() -> None:
    # mu-law has a positive (0xFF) and a negative (0x7F) zero; A-law's smallest levels are +-8
    assert ulaw_decode_int16(b"\xff\x7f").tolist() == [0, 0]
    assert alaw_decode_int16(b"\xd5\x55").tolist() == [8, -8]
    assert ulaw_encode(np.zeros(3, np.float32)) == b"\xff\xff\xff"
    assert alaw_encode(np.zeros(3, np.float32)) == b"\xd5\xd5\xd5"


@pytest.mark.parametrize(
    "data",
    [
        [0, 1, 2],  # a list is not bytes
        np.zeros((2, 2), np.uint8),  # codes are 1-D
        np.zeros(4, np.int8),  # signed bytes are not codes
        12,
    ],
)
def test_decoders_reject_what_is_not_a_byte_string(data) -> None:
    for decode in (ulaw_decode_int16, alaw_decode_int16, ulaw_decode, alaw_decode):
        with pytest.raises(InvalidAudio):
            decode(data)


@pytest.mark.parametrize(
    "audio",
    [np.array([0.0, np.nan], np.float32), np.array([np.inf]), np.array([1, 2], np.int32), np.zeros((1, 3))],
)
def test_encoders_reject_what_is_not_audio(audio) -> None:
    for encode in (ulaw_encode, alaw_encode):
        with pytest.raises(InvalidAudio):
            encode(audio)
