"""The servers a worker's models use: which they are, and a probe of each, against real sockets."""

from __future__ import annotations

import logging

import httpx
import pytest

from cluster import free_port
from fake_openai_service import FakeOpenAIService
from omnivox.core.config import Settings
from omnivox.worker.dependencies import Dependency, DependencyMonitor, dependencies, probe


def test_the_servers_a_worker_uses_are_those_its_models_are_set_to_use() -> None:
    assert dependencies(Settings()) == []
    named = dependencies(
        Settings(
            llm_url="http://l/v1", llm_api_key="k", asr="openai", asr_url="http://a/v1", tts_url="http://t/v1"
        )
    )
    assert [(d.role, d.url, d.api_key) for d in named] == [
        ("llm", "http://l/v1", "k"),
        ("asr", "http://a/v1", None),
    ]  # tts_url alone is not used: the TTS is hibari unless tts=openai
    assert dependencies(Settings(llm="echo", llm_url="http://l/v1")) == []  # the echo LLM uses none


@pytest.fixture(scope="module")
def service():
    fake = FakeOpenAIService().start()  # a FAKE OpenAI-compatible server on loopback
    yield fake
    fake.stop()


async def test_a_server_that_answers_is_fine_and_one_that_fails_or_is_gone_is_a_problem(service, caplog):
    url, state = service.url + "/v1", service.state
    async with httpx.AsyncClient(timeout=2) as client:
        assert await probe(client, Dependency("llm", url)) is None
        state.api_key = "sk-1"  # an answer all the same (401): the server is there
        assert await probe(client, Dependency("llm", url)) is None
        state.api_key = None
        state.models_status = 503
        assert "answers 503" in (await probe(client, Dependency("llm", url)) or "")
        state.models_status = None
        gone = f"http://127.0.0.1:{free_port()}/v1"
        monitor = DependencyMonitor([Dependency("llm", url), Dependency("tts", gone)])
        with caplog.at_level(logging.WARNING, logger="omnivox.worker.dependencies"):
            await monitor.check(client)
            await monitor.check(client)
        assert list(monitor.problems) == ["tts"] and "cannot be reached" in monitor.problems["tts"]
        assert len(caplog.records) == 1  # said once, not at every check
        monitor.deps = [Dependency("llm", url), Dependency("tts", url)]
        await monitor.check(client)
        assert monitor.problems == {}  # back
