"""The half-band 8 -> 16 kHz interpolator: a constant 4 ms hold-back, soxr's alignment and band."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.audio.halfband import HOLD_BACK, HalfBandUpsampler
from omnivox.audio.resample import StreamResampler, resample


def _voice_band(seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    """Noise band-limited as a telephone line's audio is (soxr HQ down to 8 kHz)."""
    x = np.random.default_rng(seed).normal(0, 0.1, int(16000 * seconds)).astype(np.float32)
    return resample(x, 16000, 8000)


def _tone(hz: float, n: int, rate: int = 8000) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(n) / rate)).astype(np.float32)


@pytest.mark.parametrize("chunk", [320, 160, 77, 1, 4000])
def test_each_chunk_comes_out_doubled_less_a_constant_4_ms(chunk: int) -> None:
    x = _voice_band()
    up = HalfBandUpsampler()
    fed = given = 0
    for at in range(0, len(x), chunk):
        piece = x[at : at + chunk]
        fed += len(piece)
        given += len(up.process(piece))
        assert given == 2 * max(0, fed - HOLD_BACK)  # never more held back than 32 samples (4 ms)
    assert given + len(up.flush()) == 2 * len(x)


def test_a_stream_is_the_same_however_it_is_chunked() -> None:
    x = _voice_band(seed=1)
    whole = HalfBandUpsampler()
    one = np.concatenate([whole.process(x), whole.flush()])
    chunked = HalfBandUpsampler()
    parts = [chunked.process(x[at : at + 77]) for at in range(0, len(x), 77)]
    assert np.array_equal(np.concatenate([*parts, chunked.flush()]), one)


def test_it_is_aligned_as_soxr_is_and_keeps_the_line_s_band() -> None:
    x = _voice_band(seed=2)
    up = HalfBandUpsampler()
    ours = np.concatenate([up.process(x), up.flush()])
    soxr_hq = resample(x, 8000, 16000)
    mid = slice(400, -400)
    assert np.corrcoef(ours[mid], soxr_hq[mid])[0, 1] > 0.999  # same samples, same place
    assert np.array_equal(ours[0::2], x)  # the even samples are the input itself


@pytest.mark.parametrize("hz", [300.0, 1000.0, 3400.0])
def test_a_tone_in_the_band_keeps_its_level(hz: float) -> None:
    up = HalfBandUpsampler()
    y = up.process(_tone(hz, 8000))[1000:-1000]
    assert abs(float(np.sqrt(np.mean(y**2))) - 0.5 / np.sqrt(2)) < 0.005


def test_the_image_of_a_tone_is_70_db_down() -> None:
    up = HalfBandUpsampler()
    y = up.process(_tone(3000.0, 8000))[1000:-1000]  # its image would be at 5 kHz
    spectrum = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    freqs = np.fft.rfftfreq(len(y), 1 / 16000)
    tone = spectrum[np.argmin(np.abs(freqs - 3000))]
    image = spectrum[np.argmin(np.abs(freqs - 5000))]
    assert 20 * np.log10(image / tone) < -70


def test_soxr_holds_back_far_more_at_this_ratio() -> None:
    """Why it exists: in 40 ms chunks soxr HQ's 8 -> 16 kHz stream holds back up to ~115 ms."""
    x = _voice_band(2.0, seed=3)
    soxr_hq = StreamResampler(8000, 16000)
    fed = given = most = 0
    for at in range(0, len(x), 320):
        fed += 320
        given += len(soxr_hq.process(x[at : at + 320]))
        most = max(most, 2 * fed - given)
    assert most > 4 * 2 * HOLD_BACK


def test_flush_starts_a_new_stream() -> None:
    up = HalfBandUpsampler()
    x = _voice_band(0.2, seed=4)
    first = np.concatenate([up.process(x), up.flush()])
    assert np.array_equal(np.concatenate([up.process(x), up.flush()]), first)
