"""The LLM stage as a client of a remote OpenAI-compatible server (vLLM, SGLang): what it streams,
what it returns, and an abort that stops the server's stream. The server is the suite's fake."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from fake_openai_service import FakeOpenAIService, fake_reply
from omnivox.core.config import Settings
from omnivox.pipeline.models.registry import build_scheduler
from omnivox.pipeline.models.voice_chunks import (
    ReplyPrompt,
    ReplyWritten,
    VoiceChunk,
    WordChunk,
    llm_output,
    to_values,
)
from omnivox.pipeline.scheduler import IncomingMessage
from omnivox.pipeline.spec import StageSpec

USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def service() -> Iterator[FakeOpenAIService]:
    s = FakeOpenAIService().start()
    yield s
    s.stop()


@pytest.fixture
def stage(service):
    service.state.token_delay_s = 0.0
    service.state.chat_disconnected = False
    settings = Settings(llm_url=service.url + "/v1", llm_model="fake-model")
    scheduler = build_scheduler(StageSpec(name="llm", scheduler="parallel", model="chat", slots=2), settings)
    scheduler.start()
    yield scheduler
    scheduler.stop()


def drain(s, until, timeout=10.0):
    got = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, got
        got.extend(s.outbox.drain())
        time.sleep(0.005)
    return got


def test_a_reply_streams_word_by_word_from_the_remote_server(stage, service) -> None:
    assert stage.info["model"] != "echo"
    prompt = ReplyPrompt(USER, max_tokens=64, voice="v", speed=1.0)
    stage.inbox.put(IncomingMessage("r", "new_request", to_values(prompt)))
    got = drain(stage, lambda g: any(m.type == "result" for m in g))
    streamed = [llm_output(m.data) for m in got if m.type == "stream"]
    words = [c.text for c in streamed if isinstance(c, WordChunk)]
    assert "".join(words).strip() == fake_reply(USER)
    before_words = streamed[: next(i for i, c in enumerate(streamed) if isinstance(c, WordChunk))]
    # the TTS stage reading the stream learns the voice from it, before the first word
    assert VoiceChunk("v", 1.0) in before_words
    assert got[-1].type == "result" and got[-1].data == to_values(ReplyWritten("".join(words), len(words)))
    assert service.state.requests[-1]["model"] == "fake-model"


def test_an_abort_stops_the_remote_stream_and_frees_the_slot(stage, service) -> None:
    service.state.token_delay_s = 0.2
    stage.inbox.put(IncomingMessage("r", "new_request", to_values(ReplyPrompt(USER))))
    drain(stage, lambda g: any(m.data.get("type") == "word" for m in g))
    stage.abort("r")
    deadline = time.monotonic() + 10
    while stage.load()["running"] or not service.state.chat_disconnected:
        assert time.monotonic() < deadline, stage.load()
        time.sleep(0.02)
    time.sleep(0.3)
    assert not [m for m in stage.outbox.drain() if m.type == "result"]  # an aborted request ends silently
