"""The noise bench's pure parts: its noises, the mix at a given SNR, and its arguments."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from omnivox.bench.noise import NOISES, add_arguments, fan, mix, noise_source, pink, suppressed
from omnivox.bench.turns import RATE


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_cover_every_noise_three_snrs_and_three_reductions() -> None:
    args = _parse()
    assert args.snr_db == [10.0, 5.0, 0.0]
    assert args.noises == list(NOISES) == ["babble", "pink", "fan"]
    assert args.reduction == ["none", "near_field", "far_field"]


def test_an_unknown_noise_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse("--noises", "rain")
    assert exited.value.code == 2 and "invalid choice: 'rain'" in capsys.readouterr().err


def _band_power(x: np.ndarray, lo: float, hi: float) -> float:
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / RATE)
    return float(spectrum[(freqs >= lo) & (freqs < hi)].sum())


def test_pink_noise_has_no_dc_and_falls_off_with_frequency() -> None:
    x = pink(RATE * 2, np.random.default_rng(0))
    assert x.dtype == np.float32 and len(x) == RATE * 2
    assert abs(float(np.mean(x))) < 1e-6
    # 1/f: each octave holds about the same power, so a low octave far outweighs the same width high up
    assert _band_power(x, 100, 200) > 10 * _band_power(x, 4000, 4100)


def test_pink_noise_is_seeded() -> None:
    a = pink(1000, np.random.default_rng(3))
    assert np.array_equal(a, pink(1000, np.random.default_rng(3)))
    assert not np.array_equal(a, pink(1000, np.random.default_rng(4)))


def test_the_fan_hums_at_50_hz_and_roars_below_400_hz() -> None:
    x = fan(RATE * 2, np.random.default_rng(0))
    assert x.dtype == np.float32 and len(x) == RATE * 2 and np.all(np.isfinite(x))
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / RATE)
    neighbours = np.median(spectrum[(freqs > 55) & (freqs < 95)])
    for harmonic in (50, 100, 150):  # the hum's lines stand out of the roar around them
        assert spectrum[freqs == harmonic][0] > 5 * neighbours
    assert _band_power(x, 0, 400) > _band_power(x, 2000, 8000)


@pytest.mark.parametrize("kind", ["pink", "fan"])
def test_a_synthetic_noise_source_needs_no_voices_and_lasts_as_asked(kind) -> None:
    x = noise_source(kind, {}, seconds=0.5)
    assert len(x) == RATE // 2
    assert np.array_equal(x, noise_source(kind, {}, seconds=0.5))  # the bench always hears the same noise


def test_babble_is_the_voices_at_once_looped_to_length() -> None:
    say = {
        "hibari": lambda s: np.full(100, 0.5, np.float32),
        "espeak": lambda s: np.full(100, 0.25, np.float32),
    }
    x = noise_source("babble", say, seconds=0.1)
    assert len(x) == RATE // 10 and x.dtype == np.float32
    assert np.allclose(x, 0.75)  # both voices summed, repeated past their length


@pytest.mark.parametrize("snr_db", [10.0, 0.0, -5.0])
def test_mix_puts_the_noise_at_the_asked_snr_with_half_a_second_either_side(snr_db) -> None:
    rng = np.random.default_rng(1)
    speech = (0.3 * np.sin(2 * np.pi * 440 * np.arange(RATE) / RATE)).astype(np.float32)
    noise = rng.standard_normal(RATE * 3).astype(np.float32)
    out = mix(speech, noise, snr_db, offset=1234)
    pad = RATE // 2
    assert len(out) == len(speech) + 2 * pad and out.dtype == np.float32
    added = out[pad:-pad] - speech
    measured = 10 * np.log10(np.mean(speech**2) / np.mean(added**2))
    assert measured == pytest.approx(snr_db, abs=0.5)
    # the padding holds noise alone, at the same gain
    assert np.mean(out[:pad] ** 2) == pytest.approx(np.mean(added**2), rel=0.2)


def test_mix_loops_a_noise_shorter_than_the_clip() -> None:
    speech = np.ones(RATE, np.float32)
    out = mix(speech, np.array([1.0, -1.0], np.float32), 0.0, offset=0)
    assert len(out) == 2 * RATE and np.all(np.isfinite(out))


def test_no_suppression_returns_the_audio_itself_at_no_cost() -> None:
    audio = np.zeros(10, np.float32)
    out, spent = suppressed(audio, "none")
    assert out is audio and spent == 0.0
