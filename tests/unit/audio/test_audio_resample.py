"""soxr resampling: lengths, preserved content, chunked streams equal to the one-shot call."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from omnivox.audio.resample import SUPPORTED_RATES, StreamResampler, resample, resampled_length
from omnivox.core.errors import InvalidAudio

PAIRS = [(a, b) for a, b in itertools.permutations(SUPPORTED_RATES, 2)]


def tone(rate: int, seconds: float = 0.5, hz: float = 300.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_tone_keeps_its_pitch_and_level(src: int, dst: int) -> None:
    y = resample(tone(src, 1.0), src, dst)  # whole seconds: every rate has a whole sample count
    assert len(y) == resampled_length(src, src, dst) == dst
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
