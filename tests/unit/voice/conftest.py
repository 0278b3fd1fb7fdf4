"""Shared voice fixtures: the embedded models load once per test session, as a worker loads them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from fake_openai_service import FakeOpenAIService
from omnivox.audio.resample import resample

WEATHER = "what is the weather like in paris today"


@pytest.fixture(scope="session")
def hibari_tts():
    from omnivox.voice.tts.hibari import HibariTts

    return HibariTts(seed=0)


@pytest.fixture(scope="session")
def weather_24k(hibari_tts) -> np.ndarray:
    """hibari saying WEATHER, 24 kHz."""
    return np.concatenate([c.audio for c in hibari_tts.synthesize(WEATHER)])


@pytest.fixture(scope="session")
def weather_16k(weather_24k) -> np.ndarray:
    return resample(weather_24k, 24000, 16000)


@pytest.fixture(scope="session")
def sphinx():
    from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr

    return PocketsphinxAsr()


@pytest.fixture
def asr(sphinx):
    """The session's decoder, reset for each test (reset is the reuse path under test)."""
    sphinx.reset()
    yield sphinx
    sphinx.reset()


@pytest.fixture
def fake_service() -> Iterator[FakeOpenAIService]:
    service = FakeOpenAIService().start()
    yield service
    service.stop()
