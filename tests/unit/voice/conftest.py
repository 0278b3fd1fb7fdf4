"""Shared voice fixtures: the embedded models load once per test session, as a worker loads them."""

from __future__ import annotations

import dataclasses
import functools
import socket
from collections.abc import Callable, Iterator

import httpx
import numpy as np
import pytest

from fake_openai_service import FakeOpenAIService, FakeState
from omnivox.audio.resample import resample
from speech import WEATHER
from voices import MISSING, espeak_available, espeak_ng


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
def espeak() -> Callable[[str], np.ndarray]:
    """espeak-ng (the second voice) saying a text, 16 kHz; each text is synthesised once."""
    if not espeak_available():
        pytest.fail(MISSING, pytrace=False)
    return functools.cache(espeak_ng)


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


@pytest.fixture(scope="session")
def _fake_server() -> Iterator[FakeOpenAIService]:
    service = FakeOpenAIService().start()
    yield service
    service.stop()  # takes uvicorn's 0.2 s shutdown tick once, not once per test


@pytest.fixture
def fake_service(_fake_server) -> FakeOpenAIService:
    """The session's fake OpenAI-compatible server, with a fresh state (settings, request log)."""
    fresh = FakeState()
    for f in dataclasses.fields(FakeState):
        setattr(_fake_server.state, f.name, getattr(fresh, f.name))
    return _fake_server


@pytest.fixture
def dead_url() -> str:
    """A loopback URL nothing listens on: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def canned_client() -> Iterator[Callable[[Callable[[httpx.Request], httpx.Response]], httpx.Client]]:
    """Clients whose server is a function (``httpx.MockTransport``): for answers no real server gives."""
    clients: list[httpx.Client] = []

    def make(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
        client = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://canned/v1")
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()
