"""WAV read/write: round trips across sample widths and channel counts, and damaged files."""

from __future__ import annotations

import io
import struct
import wave

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

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


def wav_header(
    fmt: int = 1, channels: int = 1, rate: int = 16000, bits: int = 16, data: bytes = b"\0" * 8
) -> bytes:
    """A hand-made RIFF/WAVE file, for headers ``wave`` itself would refuse to write."""
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", fmt, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_written_header_is_16_bit_mono_at_the_given_rate() -> None:
    data = write_wav(np.zeros(10, np.float32), 22050)
    with wave.open(io.BytesIO(data), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 22050, 10)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and len(data) == 44 + 20


def test_written_samples_are_clipped_pcm16() -> None:
    data = write_wav(np.array([0.0, 0.5, 1.0, -1.0, 3.0, -3.0], np.float32), 8000)
    assert np.frombuffer(data[44:], "<i2").tolist() == [0, 16384, 32767, -32767, 32767, -32767]


def test_int16_samples_are_written_as_audio() -> None:
    y, _ = read_wav(write_wav(np.array([0, 8192, -8192], np.int16), 8000))
    assert y.tolist() == [0.0, 0.25, -0.25]


def test_an_empty_clip_round_trips() -> None:
    y, rate = read_wav(write_wav(np.zeros(0, np.float32), 16000))
    assert y.shape == (0,) and y.dtype == np.float32 and rate == 16000


@pytest.mark.parametrize("rate", [0, -8000])
def test_writing_needs_a_positive_rate(rate: int) -> None:
    with pytest.raises(InvalidAudio):
        write_wav(np.zeros(4, np.float32), rate)


@pytest.mark.parametrize("audio", [np.array([np.nan], np.float32), np.zeros((4, 2), np.float32)])
def test_writing_rejects_what_is_not_mono_audio(audio: np.ndarray) -> None:
    with pytest.raises(InvalidAudio):
        write_wav(audio, 16000)


def test_write_wav_file_writes_exactly_write_wav(tmp_path) -> None:
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    write_wav_file(tmp_path / "x.wav", x, 24000)
    assert (tmp_path / "x.wav").read_bytes() == write_wav(x, 24000)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, io.BytesIO])
def test_every_in_memory_source_reads_alike(kind) -> None:
    data = write_wav(np.array([0.5, -0.5], np.float32), 16000)
    y, rate = read_wav(kind(data))
    assert rate == 16000 and np.allclose(y, [0.5, -0.5], atol=1e-4)


def test_a_string_path_reads_and_a_caller_file_object_stays_open(tmp_path) -> None:
    path = tmp_path / "a.wav"
    write_wav_file(path, np.full(8, 0.5, np.float32), 16000)
    assert read_wav(str(path))[1] == 16000
    with open(path, "rb") as f:
        read_wav(f)
        assert not f.closed  # read_wav closes only what it opened


def test_a_closed_file_object_or_a_directory_is_invalid_audio(tmp_path) -> None:
    closed = io.BytesIO(write_wav(np.zeros(4, np.float32), 16000))
    closed.close()
    with pytest.raises(InvalidAudio):
        read_wav(closed)
    with pytest.raises(InvalidAudio):
        read_wav(tmp_path)


@pytest.mark.parametrize(
    "header",
    [
        wav_header(rate=0),  # parses, but no audio has 0 Hz
        wav_header(channels=0),
        wav_header(bits=0),
        wav_header(bits=40, data=b"\0" * 10),  # 5-byte samples: no such PCM
        wav_header(fmt=3, bits=32),  # IEEE float WAV: wave reads integer PCM only
        wav_header(fmt=0xFFFE),  # WAVE_FORMAT_EXTENSIBLE
        wav_header(fmt=2, bits=4),  # ADPCM
    ],
)
def test_headers_that_are_not_readable_pcm_are_invalid_audio(header: bytes) -> None:
    with pytest.raises(InvalidAudio):
        read_wav(header)


def test_a_chunk_longer_than_its_container_is_invalid_audio() -> None:
    data = b"RIFF" + struct.pack("<I", 100) + b"WAVE" + b"LIST" + struct.pack("<I", 0x10000000) + b"abcd"
    with pytest.raises(InvalidAudio, match="chunk claims more bytes than its RIFF container"):
        read_wav(data)


def test_a_header_cut_inside_a_chunk_says_so() -> None:
    with pytest.raises(InvalidAudio, match="ends before its header does"):
        read_wav(wav_header()[:22])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=6),
    st.lists(st.tuples(st.sampled_from([4, 16, 40]), st.sampled_from([0, 1, 7, 0x7FFFFFFF, 0xFFFFFFFF]))),
    st.integers(0, 80),
)
def test_any_damaged_header_reads_or_is_invalid_audio(
    bytes_set: list[tuple[int, int]], sizes_set: list[tuple[int, int]], keep: int
) -> None:
    data = bytearray(wav_header(data=np.arange(10, dtype="<i2").tobytes()))
    for at, value in bytes_set:
        data[at] = value
    for at, size in sizes_set:  # the RIFF, fmt and data chunk sizes
        data[at : at + 4] = struct.pack("<I", size)
    try:
        y, rate = read_wav(bytes(data[: len(data) - keep]))
    except InvalidAudio:
        return
    assert y.dtype == np.float32 and rate > 0


def test_a_hand_made_header_reads_like_a_written_one() -> None:
    y, rate = read_wav(wav_header(rate=11025, data=np.array([16384, -16384], "<i2").tobytes()))
    assert rate == 11025 and y.tolist() == [0.5, -0.5]


def test_sample_width_extremes() -> None:
    assert read_wav(raw_wav(np.array([255, 0], np.uint8), 1, 1))[0].tolist() == [127 / 128, -1.0]
    y32, _ = read_wav(raw_wav(np.array([-(1 << 31), (1 << 31) - 1], "<i4"), 4, 1))
    assert y32[0] == -1.0 and y32[1] == pytest.approx(1.0, abs=1e-6)
    s24 = bytes([0xFF, 0xFF, 0x7F, 0x00, 0x00, 0x80])  # largest and smallest 24-bit values
    y24, _ = read_wav(raw_wav(np.frombuffer(s24, np.uint8), 3, 1))
    assert y24[0] == pytest.approx(1.0, abs=1e-6) and y24[1] == -1.0


def test_channels_are_averaged_for_any_width_and_count() -> None:
    # three channels of 24-bit: (0.5, -0.5, 0.25) then (0.25, 0.25, 0.25)
    def s24(v: float) -> bytes:
        return int(v * 8388608).to_bytes(3, "little", signed=True)

    frames = b"".join(s24(v) for v in (0.5, -0.5, 0.25, 0.25, 0.25, 0.25))
    y, _ = read_wav(raw_wav(np.frombuffer(frames, np.uint8), 3, 3))
    assert y.dtype == np.float32 and np.allclose(y, [0.25 / 3, 0.25])


def test_a_trailing_partial_frame_is_ignored() -> None:
    # a data chunk of 5 bytes holds two 16-bit frames; the odd byte is not a sample
    y, _ = read_wav(wav_header(data=np.array([16384, -16384], "<i2").tobytes() + b"\x01"))
    assert y.tolist() == [0.5, -0.5]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0, width=32), max_size=50), st.sampled_from([8000, 16000, 44100]))
def test_any_clip_round_trips_within_one_step(values: list[float], rate: int) -> None:
    x = np.array(values, np.float32)
    y, got_rate = read_wav(write_wav(x, rate))
    assert got_rate == rate and len(y) == len(x)
    assert np.all(np.abs(y - x) <= 1.5 / 32768)


def test_every_truncation_of_a_file_is_invalid_audio() -> None:
    good = write_wav(np.linspace(-0.5, 0.5, 20, dtype=np.float32), 16000)
    for n in range(len(good)):
        with pytest.raises(InvalidAudio):
            read_wav(good[:n])
    assert len(read_wav(good)[0]) == 20
