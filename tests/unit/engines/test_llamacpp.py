"""The local engine: the embedded SmolLM2-135M GGUF as a turn-based engine, its slot kept across turns."""

from __future__ import annotations

import threading

import pytest

from omnivox.core.errors import PrefillRequired, UnsupportedContent
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.llamacpp import LlamaCppEngine
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart

SYSTEM = ChatMessage(role="system", content="You are a friendly voice assistant. Answer briefly.")
PARAMS = GenerateParams(max_new_tokens=24)


@pytest.fixture(scope="module")
def loaded():
    engine = LlamaCppEngine.embedded(context_tokens=2048)
    yield engine
    engine.close()


@pytest.fixture
def engine(loaded):
    loaded.reset()
    return loaded


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def turn(engine, messages, params=PARAMS, stop=None):
    stats = engine.prefill(messages)
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return stats, result, chunks


def test_a_kept_conversation_computes_only_the_new_message_and_replies_as_a_full_recompute(engine):
    first_stats, first, chunks = turn(engine, [SYSTEM, user("Hi! How are you today?")])
    assert first.text and "".join(c.text_delta for c in chunks) == first.text
    assert first_stats.cached_tokens <= first_stats.prompt_length  # (the slot may hold the system prompt)
    assert engine.held_messages()[-1] == ChatMessage(role="assistant", content=first.text)
    assert engine.kv_length >= first_stats.prompt_length + first.generated_tokens - 1

    hit_stats, hit, _ = turn(engine, [user("Can you tell me a fun fact about cats?")])
    # everything before the new question was in the slot: only the question and its template ran
    assert hit_stats.cached_tokens >= first_stats.prompt_length + first.generated_tokens - 2
    assert hit_stats.input_tokens < 25 and hit_stats.message_count == 4

    conversation = engine.held_messages()[:-1]
    engine.reset()
    miss_stats, miss, _ = turn(engine, conversation)
    assert miss_stats.cached_tokens == 0 and miss_stats.input_tokens == hit_stats.prompt_length
    assert miss.text == hit.text  # greedy, one token per pass: the same reply, bit for bit


def test_stop_ends_the_reply_within_one_token_and_keeps_it(engine):
    engine.prefill([SYSTEM, user("Tell me a very long story about a dragon.")])
    stop, result, got = threading.Event(), GenResult(), []
    for chunk in engine.generate(GenerateParams(max_new_tokens=100), stop, result):
        got.append(chunk.text_delta)
        if len(got) == 2:
            stop.set()
    assert len(got) == 2 and result.stopped and result.text == "".join(got)
    assert engine.held_messages()[-1].content == result.text


def test_images_are_refused_and_nothing_changes(engine):
    engine.prefill([SYSTEM, user("Hello.")])
    image = ChatMessage(role="user", content=[TextPart(text="What is this?"), ImagePart(data="aGVsbG8=")])
    with pytest.raises(UnsupportedContent):
        engine.prefill([image])
    assert len(engine.held_messages()) == 2


def test_generate_needs_a_user_message(engine):
    with pytest.raises(PrefillRequired):
        list(engine.generate(PARAMS, threading.Event(), GenResult()))
