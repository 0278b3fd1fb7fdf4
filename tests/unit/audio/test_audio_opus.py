"""Ogg-Opus: round trips in any byte split, and damaged, stale or mid-way streams."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from omnivox.audio.ogg import FLAG_BOS, OggPageParser, build_page, ogg_crc
from omnivox.audio.opus import OpusDecoder, OpusEncoder, decode_opus, encode_opus
from omnivox.core.errors import InvalidAudio

RATE = 24000


def speechlike(seconds: float = 1.0) -> np.ndarray:
    """A gliding harmonic tone: broadband enough to exercise the codec, deterministic."""
    t = np.arange(int(RATE * seconds)) / RATE
    f0 = 150 + 60 * np.sin(2 * np.pi * 1.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    x = sum(np.sin(k * phase) / k for k in range(1, 6)) * 0.2
    return x.astype(np.float32)


def spectral_similarity(x: np.ndarray, y: np.ndarray) -> float:
    """Correlation of short-time magnitude spectra after removing the codec delay (Opus pre-skip).

    Opus is a perceptual codec: it keeps the spectrum, not the exact waveform, so that is what the
    round trip is judged on.
    """
    n = len(x) - 2000
    lag = max(range(0, 1000), key=lambda d: float(np.dot(y[d : d + n], x[:n])))

    def spec(a: np.ndarray) -> np.ndarray:
        frames = np.lib.stride_tricks.sliding_window_view(a, 512)[::256] * np.hanning(512)
        return np.abs(np.fft.rfft(frames, axis=1))

    return float(np.corrcoef(spec(x[:n]).ravel(), spec(y[lag : lag + n]).ravel())[0, 1])


@pytest.fixture(scope="module")
def stream() -> bytes:
    return encode_opus(speechlike())


def test_round_trip_keeps_length_and_waveform(stream: bytes) -> None:
    x = speechlike()
    y = decode_opus(stream)
    assert stream.startswith(b"OggS") and b"OpusHead" in stream[:64]
    assert len(y) == len(x)  # whole 40 ms packets: 1 s is exactly 25 of them
    assert spectral_similarity(x, y) > 0.98
    assert abs(np.sqrt(np.mean(y**2)) / np.sqrt(np.mean(x**2)) - 1) < 0.1  # same loudness


def test_streaming_encoder_in_20ms_chunks_equals_one_shot() -> None:
    x = speechlike()
    enc = OpusEncoder()
    chunks = [enc.encode(x[i : i + 480]) for i in range(0, len(x), 480)]
    data = b"".join(chunks) + enc.flush()
    assert len(decode_opus(data)) == len(x)
    assert sum(1 for c in chunks if c) >= 20  # pages come out while audio goes in, not at the end


@pytest.mark.parametrize("split", [1, 7, 33, 200, 4096])
def test_any_byte_split_decodes_the_same(stream: bytes, split: int) -> None:
    dec = OpusDecoder()
    y = np.concatenate([dec.decode(stream[i : i + split]) for i in range(0, len(stream), split)])
    assert np.array_equal(y, decode_opus(stream))
    assert dec.corrupt_pages == dec.stale_pages == dec.skipped_bytes == 0


def test_stream_joined_mid_page_decodes_from_the_next_page(stream: bytes) -> None:
    dec = OpusDecoder()
    y = dec.decode(stream[len(stream) // 2 :])
    assert dec.skipped_bytes > 0  # the tail of the page it started in
    assert 0.3 * RATE < len(y) < 0.55 * RATE  # about the second half


def test_stale_and_duplicated_pages_are_dropped(stream: bytes) -> None:
    dec = OpusDecoder()
    dec.decode(stream)
    pages = OggPageParser().feed(stream)
    replay = b"".join(p.raw for p in pages[5:10])
    assert len(dec.decode(replay)) == 0
    assert dec.stale_pages == 5


def test_new_stream_after_an_old_one_restarts_the_decoder(stream: bytes) -> None:
    dec = OpusDecoder()
    a = dec.decode(stream)
    b = dec.decode(stream)  # same serial and sequence numbers, but it begins with a BOS page
    assert np.array_equal(a, b) and dec.stale_pages == 0


def test_damaged_page_raises_then_the_decoder_recovers(stream: bytes) -> None:
    bad = bytearray(stream)
    bad[len(bad) // 2] ^= 0xFF
    dec = OpusDecoder()
    with pytest.raises(InvalidAudio) as info:
        dec.decode(bytes(bad))
    assert info.value.details["corrupt_pages"] == 1
    carried = dec.decode(b"")  # audio decoded before the error comes out next
    assert len(speechlike()) - 2000 <= len(carried) < len(speechlike())
    fresh = OpusDecoder()
    assert np.array_equal(dec.decode(stream), fresh.decode(stream))


def test_damaged_length_field_does_not_stall_the_stream(stream: bytes) -> None:
    # a page claiming 255 segments would otherwise make the parser wait for ~64 KiB
    pos = stream.index(b"OggS", 200)
    bad = bytearray(stream)
    bad[pos + 26] = 255
    dec = OpusDecoder()
    with pytest.raises(InvalidAudio):
        dec.decode(bytes(bad))
    assert len(dec.decode(b"")) > 0.8 * RATE


@pytest.mark.parametrize(
    "data", [b"hello world" * 30, bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8))]
)
def test_garbage_is_invalid_audio(data: bytes) -> None:
    with pytest.raises(InvalidAudio):
        decode_opus(data)


def test_valid_ogg_page_with_a_broken_opus_packet_is_invalid_audio(stream: bytes) -> None:
    head = OggPageParser().feed(stream)[:2]
    junk = build_page(0, 960, head[0].serial, 2, [b"\xff" * 3])
    dec = OpusDecoder()
    dec.decode(b"".join(p.raw for p in head))
    try:
        y = dec.decode(junk)
    except InvalidAudio:
        y = np.zeros(0, np.float32)
    # either reported as invalid or concealed as a short burst, never an exception of another type
    assert len(y) <= 960
    assert len(dec.decode(stream)) == len(speechlike())


def test_non_bytes_input_is_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        OpusDecoder().decode("OggS")  # type: ignore[arg-type]


def test_unsupported_rate_is_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        OpusEncoder(44100)


def test_ogg_crc_matches_the_encoder(stream: bytes) -> None:
    page = OggPageParser().feed(stream)[0]
    (crc,) = struct.unpack_from("<I", page.raw, 22)
    assert page.flags & FLAG_BOS
    assert ogg_crc(page.raw[:22] + b"\0\0\0\0" + page.raw[26:]) == crc
