"""Pieces of ``bench asr``: number words for WER, and the telephone copy of a clip."""

from __future__ import annotations

import numpy as np

from omnivox.bench.asr import phone_copy, spoken_digits
from omnivox.voice.asr.base import word_error_rate


def test_digits_count_as_the_words_they_are_read_as():
    assert (
        word_error_rate(
            "my phone number is five five five one two three four",
            spoken_digits("My phone number is 555-1234."),
        )
        == 0.0
    )
    assert spoken_digits("no digits here") == "no digits here"


def test_a_phone_copy_keeps_the_length_and_loses_the_high_band():
    rate = 16000
    t = np.arange(rate) / rate
    low, high = np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 6000 * t)
    audio = (0.3 * (low + high)).astype(np.float32)
    copy = phone_copy(audio)
    assert abs(len(copy) - len(audio)) <= 2
    spectrum = np.abs(np.fft.rfft(copy[:rate]))
    assert spectrum[6000] < 0.05 * spectrum[440]  # 8 kHz sampling keeps nothing above 4 kHz
