"""The echo engine: a word per token, the conversation held like a model's cache, stop and max tokens."""

from __future__ import annotations

import threading
import types

import pytest

from omnivox.engines import echo
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.echo import PREFIX, EchoEngine
from omnivox.protocol.chat import ChatMessage, TextPart


def msg(role: str, content: str) -> ChatMessage:
    return ChatMessage(role=role, content=content)  # type: ignore[arg-type]


def run(engine: EchoEngine, params: GenerateParams = GenerateParams(), stop: threading.Event | None = None):
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return chunks, result


def test_prefill_counts_a_token_per_word_plus_the_role_and_reuses_what_it_holds() -> None:
    engine = EchoEngine()
    first = engine.prefill([msg("system", "be kind"), msg("user", "hello there world")])
    assert (first.prompt_length, first.message_count, first.cached_tokens, first.input_tokens) == (7, 2, 0, 7)
    assert first.transcripts == ()
    second = engine.prefill([msg("user", "again")])
    assert (second.prompt_length, second.message_count, second.cached_tokens, second.input_tokens) == (
        9,
        3,
        7,
        2,
    )
    assert engine.kv_length == 9


def test_text_parts_count_like_the_text_they_hold() -> None:
    engine = EchoEngine()
    parts = ChatMessage(role="user", content=[TextPart(text="one two"), TextPart(text="three")])
    assert engine.prefill([parts]).input_tokens == 4
    _, result = run(engine)
    assert result.text == f"{PREFIX} one two three"


def test_generate_says_the_last_user_words_back_word_by_word_and_holds_the_reply() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", "open the window")])
    chunks, result = run(engine)
    assert [c.text_delta for c in chunks] == [PREFIX, " open", " the", " window"]
    assert all(c.tokens == 1 and c.audio is None for c in chunks)
    assert result.text == "".join(c.text_delta for c in chunks) == "(echo) open the window"
    assert result.generated_tokens == 4 and not result.stopped
    assert engine.held_messages()[-1] == msg("assistant", result.text)
    assert engine.kv_length == 4 + 5  # the user message, then the reply with its role marker


def test_the_last_user_message_is_echoed_even_after_a_later_assistant_one() -> None:
    engine = EchoEngine()
    engine.prefill(
        [msg("user", "first"), msg("assistant", "a reply"), msg("user", "second"), msg("assistant", "x")]
    )
    assert run(engine)[1].text == "(echo) second"


@pytest.mark.parametrize("conversation", [[], [msg("system", "only instructions")], [msg("user", "   ")]])
def test_nothing_to_echo_is_said_so(conversation: list[ChatMessage]) -> None:
    engine = EchoEngine()
    engine.prefill(conversation)
    assert run(engine)[1].text == "(echo) (nothing to echo)"


def test_max_new_tokens_counts_the_prefix_and_is_not_a_stop() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", "one two three four")])
    chunks, result = run(engine, GenerateParams(max_new_tokens=2))
    assert len(chunks) == 2 and result.text == "(echo) one" and not result.stopped
    assert engine.held_messages()[-1].content == "(echo) one"


def test_stop_ends_the_reply_after_the_chunk_in_hand_and_holds_what_was_said() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", " ".join(f"w{i}" for i in range(50)))])
    stop, result, said = threading.Event(), GenResult(), []
    for chunk in engine.generate(GenerateParams(), stop, result):
        said.append(chunk.text_delta)
        if len(said) == 3:
            stop.set()
    assert said == [PREFIX, " w0", " w1"]
    assert result.stopped and result.generated_tokens == 3 and result.text == "(echo) w0 w1"
    assert engine.held_messages()[-1].content == "(echo) w0 w1"


def test_stop_before_generate_says_nothing_but_still_holds_an_empty_reply() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", "hi")])
    stop = threading.Event()
    stop.set()
    chunks, result = run(engine, stop=stop)
    assert chunks == [] and result.stopped and result.text == "" and result.generated_tokens == 0
    assert engine.held_messages()[-1] == msg("assistant", "")
    assert engine.kv_length == 2 + 1


def test_the_word_delay_is_waited_before_every_word(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float] = []
    monkeypatch.setattr(echo, "time", types.SimpleNamespace(sleep=waited.append))
    engine = EchoEngine(word_delay_s=0.25)
    engine.prefill([msg("user", "a b")])
    run(engine)
    assert waited == [0.25, 0.25, 0.25]
    waited.clear()
    plain = EchoEngine()
    plain.prefill([msg("user", "a b")])
    run(plain)
    assert waited == []


def test_reset_forgets_everything_and_held_messages_is_a_copy() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", "hi")])
    held = engine.held_messages()
    held.append(msg("user", "not sent"))
    assert len(engine.held_messages()) == 1
    engine.reset()
    assert engine.kv_length == 0 and engine.held_messages() == []
    assert engine.prefill([msg("user", "hi")]).cached_tokens == 0


def test_a_consumer_that_walks_away_leaves_the_cut_short_reply_held() -> None:
    engine = EchoEngine()
    engine.prefill([msg("user", "one two three")])
    result = GenResult()
    gen = engine.generate(GenerateParams(), threading.Event(), result)
    first = next(gen)
    gen.close()
    assert result.text == first.text_delta
    assert engine.held_messages()[-1] == msg("assistant", first.text_delta)


def test_the_echo_engine_serves_turn_based_streaming_alone() -> None:
    from omnivox.engines.base import capabilities_of

    engine = EchoEngine()
    assert engine.chat is engine and engine.voice is None and engine.duplex is None
    assert capabilities_of(engine) == EchoEngine.capabilities
