"""Ogg-Opus: round trips in any byte split, and damaged, stale or mid-way streams."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from omnivox.audio.ogg import FLAG_BOS, OggPageParser, build_page, ogg_crc
from omnivox.audio.opus import OPUS_RATES, OpusDecoder, OpusEncoder, decode_opus, encode_opus
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


def tone(rate: int, seconds: float = 1.0, hz: float = 300.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def pages_of(data: bytes) -> list[bytes]:
    return [p.raw for p in OggPageParser().feed(data)]


def with_header(
    raw: bytes, serial: int | None = None, sequence: int | None = None, flags: int | None = None
) -> bytes:
    """A page with other serial / sequence / flags and a fresh checksum (a page of another stream)."""
    b = bytearray(raw)
    if flags is not None:
        b[5] = flags
    if serial is not None:
        b[14:18] = struct.pack("<I", serial)
    if sequence is not None:
        b[18:22] = struct.pack("<I", sequence)
    b[22:26] = b"\0\0\0\0"
    b[22:26] = struct.pack("<I", ogg_crc(bytes(b)))
    return bytes(b)


def without_serial(data: bytes) -> bytes:
    """The stream with every page's serial set to 0: what is left once the random serial is out."""
    return b"".join(with_header(p, serial=0) for p in pages_of(data))


def serials(data: bytes) -> set[int]:
    return {p.serial for p in OggPageParser().feed(data)}


def test_each_stream_has_a_fresh_random_serial() -> None:
    enc = OpusEncoder()
    streams = []
    for _ in range(4):
        streams.append(enc.encode(tone(RATE, 0.1)) + enc.flush())  # flush ends the stream
    streams.append(OpusEncoder().encode(tone(RATE, 0.1)))
    enc.encode(tone(RATE, 0.1))
    enc.reset()  # reset, too, starts a new stream
    streams.append(enc.encode(tone(RATE, 0.1)))
    assert all(len(serials(s)) == 1 for s in streams)  # one serial for every page of a stream
    assert len(set.union(*map(serials, streams))) == len(streams)  # and none shared: 2^-32 odds


@pytest.mark.parametrize("seconds", [0.1, 1000 / RATE])
def test_a_flushed_stream_ends_with_an_end_of_stream_page(seconds: float) -> None:
    enc = OpusEncoder()
    data = enc.encode(tone(RATE, seconds)) + enc.flush()
    pages = OggPageParser().feed(data)
    assert [p.eos for p in pages] == [False] * (len(pages) - 1) + [True]
    assert [p.sequence for p in pages] == list(range(len(pages)))
    assert pages[0].bos and not any(p.bos for p in pages[1:])
    assert len(decode_opus(data)) == -(-len(tone(RATE, seconds)) // 960) * 960


def test_a_partial_packet_is_the_end_of_stream_page() -> None:
    enc = OpusEncoder()
    body = enc.encode(tone(RATE, 0.05))  # one whole packet and 240 samples
    tail = enc.flush()
    (last,) = OggPageParser().feed(tail)
    assert last.eos and last.granule > OggPageParser().feed(body)[-1].granule  # it holds the padded packet


def test_a_stream_of_whole_packets_ends_with_an_empty_end_of_stream_page(stream: bytes) -> None:
    *_, before, last = OggPageParser().feed(stream)
    assert last.eos and not before.eos
    assert last.raw[26] == 0  # no segments: no packet, no audio
    assert (last.granule, last.serial, last.sequence) == (before.granule, before.serial, before.sequence + 1)
    assert len(decode_opus(stream)) == len(speechlike())


def test_after_a_flush_the_next_audio_starts_a_new_stream() -> None:
    enc = OpusEncoder()
    first = enc.encode(tone(RATE, 0.1)) + enc.flush()
    second = enc.encode(tone(RATE, 0.1)) + enc.flush()
    assert b"OpusHead" in second[:64] and OggPageParser().feed(second)[0].bos
    assert without_serial(first) == without_serial(second) and serials(first) != serials(second)
    dec = OpusDecoder()  # a client decodes one response's stream after the other
    assert len(dec.decode(first + second)) == 2 * 2880 and dec.stale_pages == 0


def test_a_flush_after_a_flush_or_a_reset_is_empty() -> None:
    enc = OpusEncoder()
    enc.encode(tone(RATE, 0.1))
    assert enc.flush() and enc.flush() == b""
    enc.encode(tone(RATE, 0.1))
    enc.reset()
    assert enc.flush() == b""


@pytest.mark.parametrize("rate", OPUS_RATES)
def test_every_opus_rate_round_trips(rate: int) -> None:
    x = tone(rate)
    data = encode_opus(x, rate)
    y = decode_opus(data, rate)
    assert y.dtype == np.float32
    assert len(y) == -(-len(x) // 960) * 960  # the last packet is padded to 960 samples
    level = np.sqrt(np.mean(y[: len(x)] ** 2)) / np.sqrt(np.mean(x**2))
    assert 0.85 < level < 1.15


@pytest.mark.parametrize(("rate", "factor"), [(48000, 2.0), (16000, 2 / 3), (8000, 1 / 3)])
def test_a_stream_decodes_at_any_opus_rate(stream: bytes, rate: int, factor: float) -> None:
    # Opus decodes to whatever rate the reader asks for, independent of the encoder's rate
    y = decode_opus(stream, rate)
    assert len(y) == round(len(speechlike()) * factor)


def test_codec_delay_is_a_few_milliseconds() -> None:
    x = speechlike()
    x[RATE // 2 :] = 0  # a burst then silence: the lag of the best match is the codec delay
    y = decode_opus(encode_opus(x))
    n = RATE // 2
    lag = int(np.argmax([float(np.dot(y[d : d + n], x[:n])) for d in range(0, RATE // 50)]))
    assert 0 < lag < RATE // 100  # measured 151 samples (6.3 ms): Opus's look-ahead, not trimmed


def test_a_partial_packet_is_padded_with_silence() -> None:
    x = tone(RATE, 1000 / RATE)
    y = decode_opus(encode_opus(x))
    assert len(y) == 1920
    assert np.abs(y[1300:]).max() < 0.05 < np.abs(y[:1000]).max()


def test_encoder_holds_back_a_partial_packet_until_flushed() -> None:
    enc = OpusEncoder()
    assert enc.encode(np.zeros(100, np.float32)) == b""  # no whole packet yet: nothing, not even headers
    assert enc.encode(np.zeros(0, np.float32)) == b""
    tail = enc.flush()
    assert tail.startswith(b"OggS") and len(decode_opus(tail)) == 960
    assert enc.flush() == b""  # nothing left


def test_flush_with_nothing_pending_is_empty() -> None:
    enc = OpusEncoder()
    assert enc.flush() == b""
    assert encode_opus(np.zeros(0, np.float32)) == b""


def test_encoder_reset_drops_pending_audio_and_starts_a_new_stream() -> None:
    enc = OpusEncoder()
    first = enc.encode(tone(RATE, 0.1))
    enc.encode(np.zeros(500, np.float32))
    enc.reset()
    assert enc.flush() == b""
    again = enc.encode(tone(RATE, 0.1))
    # headers again, the same bytes but for the serial (and checksum): encoding is deterministic, and
    # each stream gets a serial of its own
    assert without_serial(again) == without_serial(first)
    assert serials(again) != serials(first)
    assert b"OpusHead" in again[:64] and OggPageParser().feed(again)[0].flags & FLAG_BOS


def test_int16_input_encodes_like_the_same_floats() -> None:
    x = (tone(RATE, 0.2) * 32767).astype(np.int16)
    assert without_serial(encode_opus(x)) == without_serial(encode_opus(x.astype(np.float32) / 32768))


@pytest.mark.parametrize(
    "audio", [np.array([0.0, np.nan], np.float32), np.zeros((960, 2), np.float32), np.array(["a"])]
)
def test_encoder_rejects_what_is_not_audio(audio: np.ndarray) -> None:
    with pytest.raises(InvalidAudio):
        OpusEncoder().encode(audio)


@pytest.mark.parametrize("rate", [0, 11025, 22050, 44100, 96000])
def test_decoder_rejects_rates_opus_does_not_have(rate: int) -> None:
    with pytest.raises(InvalidAudio) as info:
        OpusDecoder(rate)
    assert info.value.details["sample_rate"] == rate
    with pytest.raises(InvalidAudio):
        decode_opus(b"", rate)


def test_decoder_counts_every_page(stream: bytes) -> None:
    dec = OpusDecoder()
    dec.decode(stream)
    assert dec.pages == len(pages_of(stream)) and dec.stale_pages == 0


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_any_bytes_like_input_decodes(stream: bytes, kind) -> None:
    assert np.array_equal(OpusDecoder().decode(kind(stream)), decode_opus(stream))


def test_empty_input_is_no_audio_and_no_error() -> None:
    assert decode_opus(b"").shape == (0,)
    dec = OpusDecoder()
    assert dec.decode(b"").shape == (0,) and dec.pages == 0


def test_stream_joined_at_a_page_boundary_needs_no_headers(stream: bytes) -> None:
    pages = pages_of(stream)
    dec = OpusDecoder()
    y = dec.decode(b"".join(pages[2:]))  # without the OpusHead and OpusTags pages
    assert len(y) == len(speechlike()) and dec.skipped_bytes == 0


def test_pages_of_another_stream_are_stale(stream: bytes) -> None:
    pages = pages_of(stream)
    dec = OpusDecoder()
    dec.decode(b"".join(pages[:5]))
    intruder = with_header(pages[5], serial=0xBEEF)
    assert len(dec.decode(intruder)) == 0 and dec.stale_pages == 1
    # the stream it follows goes on where it was
    assert len(dec.decode(b"".join(pages[5:]))) > 0 and dec.stale_pages == 1


def test_a_new_beginning_of_stream_page_from_another_serial_takes_over(stream: bytes) -> None:
    pages = pages_of(stream)
    dec = OpusDecoder()
    dec.decode(b"".join(pages[:10]))
    restarted = [with_header(p, serial=99) for p in pages]
    assert restarted[0][5] & FLAG_BOS  # the client restarted its encoder under a new serial
    assert np.array_equal(dec.decode(b"".join(restarted)), decode_opus(stream))
    assert dec.stale_pages == 0


def test_decoder_reset_forgets_the_stream(stream: bytes) -> None:
    pages = pages_of(stream)
    dec = OpusDecoder()
    dec.decode(b"".join(pages[:10]) + pages[10][:50])  # mid-stream, mid-page
    dec.reset()
    assert np.array_equal(dec.decode(stream), decode_opus(stream))
    assert dec.corrupt_pages == 0 and dec.stale_pages == 0


def test_decode_opus_without_a_single_page_is_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        decode_opus(b"OggS" + b"\x00" * 10)  # a capture pattern, but no whole page


def test_a_small_stream_of_long_audio_is_refused_once_it_passes_the_limit() -> None:
    # a file far longer than allowed (an 859 KB "Opus bomb" of tiny packets decoded to 4,080 s
    # before any check): with a limit, decoding stops as soon as the limit is passed
    bomb = encode_opus(np.zeros(48000 * 120, np.float32), 48000)
    with pytest.raises(InvalidAudio, match="longer than 30 s"):
        decode_opus(bomb, 24000, max_seconds=30)
    short = encode_opus(np.zeros(48000 * 2, np.float32), 48000)
    assert abs(len(decode_opus(short, 24000, max_seconds=30)) - 48000) < 2000
