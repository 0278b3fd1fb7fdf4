"""The end of speech refined by the energy: synthetic audio, no model."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.vad.energy import EndRefinement

RATE = 16000


def tone(ms: float, amplitude: float, hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(ms * RATE / 1000)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def silence(ms: float) -> np.ndarray:
    return np.zeros(int(ms * RATE / 1000), np.float32)


def at(ms: float) -> int:
    return int(ms * RATE / 1000)


def test_the_end_is_where_the_tone_stops_not_where_the_vad_says() -> None:
    audio = np.concatenate([tone(1000, 0.3), silence(200)])
    # the VAD puts the end 96 ms late (its probability held on); 200 ms heard after the tone
    end = EndRefinement().speech_end(audio, RATE, at(1096))
    assert end is not None and abs(end - at(1000)) <= at(8)


def test_the_end_is_never_put_before_the_lookback_nor_after_the_vad() -> None:
    audio = np.concatenate([tone(1000, 0.3), silence(400)])
    end = EndRefinement(lookback_ms=64).speech_end(audio, RATE, at(1200))
    assert end == at(1200 - 64)  # it was quiet since 1000 ms, but it looks back only 64 ms
    # the VAD's date already at the energy's fall: nothing sooner to say
    assert EndRefinement().speech_end(audio, RATE, at(1000)) is None


def test_noise_that_never_drops_keeps_the_vads_date() -> None:
    rng = np.random.default_rng(1)
    audio = np.concatenate([tone(1000, 0.3), silence(200)])
    audio = audio + (0.03 * rng.standard_normal(len(audio))).astype(np.float32)  # 20 dB under
    assert EndRefinement().speech_end(audio, RATE, at(1096)) is None


def test_a_dip_the_speech_comes_back_from_is_not_the_end() -> None:
    # a 60 ms gap inside the speech, then the speech again up to now
    audio = np.concatenate([tone(1000, 0.3), silence(60), tone(100, 0.3)])
    assert EndRefinement().speech_end(audio, RATE, at(1064)) is None


def test_a_soft_tail_above_the_drop_is_speech() -> None:
    # a final consonant 20 dB under the vowel (a drop of 30 dB is asked for): the end is after it
    audio = np.concatenate([tone(800, 0.3), tone(80, 0.03, 3000.0), silence(200)])
    end = EndRefinement().speech_end(audio, RATE, at(976))
    assert end is not None and abs(end - at(880)) <= at(8)


def test_too_little_speech_for_a_level_or_nothing_after_the_vads_end() -> None:
    short = np.concatenate([tone(40, 0.3), silence(100)])
    assert EndRefinement().speech_end(short, RATE, at(48)) is None  # 6 frames before the VAD's end
    audio = np.concatenate([tone(1000, 0.3), silence(96)])
    assert EndRefinement().speech_end(audio, RATE, len(audio)) is None


@pytest.mark.parametrize("kwargs", [{"drop_db": 0}, {"frame_ms": 0}, {"lookback_ms": -1}])
def test_bad_settings_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        EndRefinement(**kwargs)
