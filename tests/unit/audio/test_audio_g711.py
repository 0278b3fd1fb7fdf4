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
