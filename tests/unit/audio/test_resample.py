"""soxr resampling: lengths, preserved content, chunked streams equal to the one-shot call."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.audio.resample import (
    SUPPORTED_RATES,
    StreamResampler,
    check_rate,
    resample,
)
from omnivox.core.errors import InvalidAudio

PAIRS = [(a, b) for a, b in itertools.permutations(SUPPORTED_RATES, 2)]


def tone(rate: int, seconds: float = 0.5, hz: float = 300.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_tone_keeps_its_pitch_and_level(src: int, dst: int) -> None:
    y = resample(tone(src, 1.0), src, dst)  # whole seconds: every rate has a whole sample count
    assert len(y) == dst
    mid = y[len(y) // 4 : 3 * len(y) // 4]  # away from the filter's edge effects
    assert np.allclose(mid, tone(dst, 1.0)[len(y) // 4 : 3 * len(y) // 4], atol=0.01)


@pytest.mark.parametrize(("src", "dst"), [(24000, 16000), (8000, 24000), (48000, 16000), (16000, 16000)])
def test_streaming_in_20ms_chunks_equals_one_shot(src: int, dst: int) -> None:
    x = np.random.default_rng(0).normal(0, 0.1, src).astype(np.float32)
    r = StreamResampler(src, dst)
    step = src // 50
    out = [r.process(x[i : i + step]) for i in range(0, len(x), step)]
    out.append(r.flush())
    y = np.concatenate(out)
    assert np.allclose(y, resample(x, src, dst), atol=1e-6)


def test_down_then_up_preserves_speech_band() -> None:
    x = tone(24000, 1.0, 1000.0)
    y = resample(resample(x, 24000, 8000), 8000, 24000)
    assert np.corrcoef(x[2400:-2400], y[2400:-2400])[0, 1] > 0.999


def test_flush_resets_for_the_next_stream() -> None:
    r = StreamResampler(16000, 24000)
    first = np.concatenate([r.process(tone(16000)), r.flush()])
    second = np.concatenate([r.process(tone(16000)), r.flush()])
    assert np.array_equal(first, second)


@pytest.mark.parametrize("rate", [0, 12345, 96000, -16000])
def test_unsupported_rates_are_invalid_audio(rate: int) -> None:
    with pytest.raises(InvalidAudio):
        resample(tone(16000), 16000, rate)
    with pytest.raises(InvalidAudio):
        StreamResampler(rate, 16000)


def test_bad_samples_are_invalid_audio() -> None:
    with pytest.raises(InvalidAudio):
        resample(np.array([0.0, np.nan], np.float32), 16000, 24000)


def noise(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, n).astype(np.float32)


@pytest.mark.parametrize("rate", SUPPORTED_RATES)
def test_check_rate_returns_a_supported_rate(rate: int) -> None:
    assert check_rate(rate) == rate


def test_unsupported_rate_names_the_rate() -> None:
    with pytest.raises(InvalidAudio) as info:
        check_rate(96000)
    assert info.value.details == {"sample_rate": 96000}


@pytest.mark.parametrize(("src", "dst"), [(16000, 24000), (24000, 24000)])
def test_empty_clip_is_an_empty_float32_clip(src: int, dst: int) -> None:
    y = resample(np.zeros(0, np.float32), src, dst)
    assert y.shape == (0,) and y.dtype == np.float32


def test_same_rate_returns_a_copy_not_a_view() -> None:
    x = tone(16000)
    y = resample(x, 16000, 16000)
    assert np.array_equal(x, y) and not np.shares_memory(x, y)
    y[:] = 0
    assert x.any()


def test_int16_input_is_scaled_like_float() -> None:
    x = (tone(16000) * 32767).astype(np.int16)
    assert np.array_equal(resample(x, 16000, 24000), resample(x.astype(np.float32) / 32768, 16000, 24000))


@pytest.mark.parametrize(("src", "dst", "hz"), [(48000, 16000, 12000.0), (24000, 8000, 6000.0)])
def test_content_above_the_new_nyquist_is_filtered_out(src: int, dst: int, hz: float) -> None:
    y = resample(tone(src, 1.0, hz), src, dst)  # would alias into the band if it were not filtered
    assert np.sqrt(np.mean(y[dst // 10 : -dst // 10] ** 2)) < 0.005


@settings(max_examples=40, deadline=None)
@given(pair=st.sampled_from(PAIRS), n=st.integers(1, 3000), cuts=st.lists(st.integers(0, 3000), max_size=6))
def test_a_chunked_stream_totals_what_one_call_returns(pair, n: int, cuts: list[int]) -> None:
    src, dst = pair
    x = noise(n)
    r = StreamResampler(src, dst)
    bounds = [0, *sorted(c for c in cuts if c < n), n]
    total = sum(len(r.process(x[a:b])) for a, b in itertools.pairwise(bounds)) + len(r.flush())
    assert total == len(resample(x, src, dst))


@settings(max_examples=40, deadline=None)
@given(
    pair=st.sampled_from([(24000, 16000), (16000, 24000), (44100, 16000), (8000, 48000), (22050, 16000)]),
    n=st.integers(1, 3000),
    cuts=st.lists(st.integers(0, 3000), max_size=10),
)
def test_any_chunking_of_a_stream_gives_the_one_shot_result(pair, n: int, cuts: list[int]) -> None:
    src, dst = pair
    x = noise(n)
    r = StreamResampler(src, dst)
    bounds = [0, *sorted(c for c in cuts if c < n), n]
    out = [r.process(x[a:b]) for a, b in itertools.pairwise(bounds)]
    y = np.concatenate([*out, r.flush()])
    ref = resample(x, src, dst)
    assert len(y) == len(ref)  # the total over the stream is exact
    assert np.allclose(y, ref, atol=1e-5)


def test_stream_output_is_held_back_until_flush() -> None:
    r = StreamResampler(24000, 16000)
    first = r.process(noise(480))
    assert len(first) < 320  # the filter delay: less than the chunk's worth comes out at first
    tail = r.flush()
    assert len(first) + len(tail) == len(resample(noise(480), 24000, 16000))


def test_empty_chunks_are_harmless() -> None:
    r = StreamResampler(16000, 24000)
    assert r.process(np.zeros(0, np.float32)).shape == (0,)
    y = np.concatenate([r.process(noise(1600)), r.process(np.zeros(0, np.float32)), r.flush()])
    assert np.allclose(y, resample(noise(1600), 16000, 24000), atol=1e-5)


def test_passthrough_stream_copies_and_has_no_tail() -> None:
    r = StreamResampler(16000, 16000)
    assert r.passthrough and not StreamResampler(16000, 8000).passthrough
    x = noise(100)
    y = r.process(x)
    assert np.array_equal(x, y) and not np.shares_memory(x, y)
    assert r.flush().shape == (0,)


def test_reset_mid_stream_starts_a_clean_stream() -> None:
    r = StreamResampler(48000, 16000)
    r.process(noise(999, seed=5))  # an unrelated stream, abandoned with samples held back
    r.reset()
    y = np.concatenate([r.process(tone(48000)), r.flush()])
    assert np.allclose(y, resample(tone(48000), 48000, 16000), atol=1e-5)


def test_stream_rejects_bad_chunks() -> None:
    r = StreamResampler(16000, 24000)
    with pytest.raises(InvalidAudio):
        r.process(np.zeros((2, 160), np.float32))
    with pytest.raises(InvalidAudio):
        r.process(np.array([np.inf], np.float32))
    with pytest.raises(InvalidAudio):
        resample(np.zeros((10, 2), np.float32), 16000, 24000)


@pytest.mark.parametrize("src", [24000, 16000, 8000])
def test_process_float32_gives_what_process_gives_in_new_arrays(src: int) -> None:
    rng = np.random.default_rng(src)
    checked, trusted = StreamResampler(src, 16000), StreamResampler(src, 16000)
    scratch = np.zeros(2000, np.float32)
    kept = []
    for n in (1, 7, 960, 0, 1999, 3):
        chunk = (0.2 * rng.standard_normal(n)).astype(np.float32)
        scratch[:n] = chunk
        got = trusted.process_float32(scratch[:n])
        assert np.array_equal(got, checked.process(chunk))
        assert not np.shares_memory(got, scratch)  # the caller reuses its buffer
        kept.append((got, got.copy()))
    assert all(np.array_equal(a, b) for a, b in kept)  # later chunks overwrote none of them
    assert np.array_equal(trusted.flush(), checked.flush())
