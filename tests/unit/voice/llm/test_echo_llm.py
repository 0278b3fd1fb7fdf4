"""The echo LLM: the user's last words back, word by word, prefixed; max_tokens, delay and stop."""

from __future__ import annotations

import threading

import hypothesis.strategies as st
from hypothesis import given, settings

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.echo_llm import EchoLlm


def user(text: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="You are an echo."),
        ChatMessage(role="user", content="an older question"),
        ChatMessage(role="assistant", content="You said: an older question"),
        ChatMessage(role="user", content=text),
    ]


class _RecordingEvent(threading.Event):
    """An Event that records how long it was asked to wait (the echo paces itself with it)."""

    def __init__(self, set_after_waits: int | None = None) -> None:
        super().__init__()
        self.waits: list[float | None] = []
        self.set_after_waits = set_after_waits

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if self.set_after_waits is not None and len(self.waits) >= self.set_after_waits:
            self.set()
        return self.is_set()


def test_echoes_the_last_user_message_word_by_word() -> None:
    llm = EchoLlm()
    pieces = list(llm.stream(user("  what is the weather  ")))
    assert pieces == ["You", " said:", " what", " is", " the", " weather"]
    assert llm.complete(user("what is the weather")) == "You said: what is the weather"
    assert llm.name == "echo" and not llm.vision


def test_nothing_to_echo_gives_the_empty_reply() -> None:
    llm = EchoLlm(empty_reply="Say something.")
    assert llm.complete(user("   ")) == "Say something."
    assert llm.complete([]) == "Say something."
    assert llm.reply_for([ChatMessage(role="system", content="prompt only")]) == "Say something."


def test_the_prefix_is_configurable() -> None:
    assert EchoLlm(prefix="").complete(user("just this")) == "just this"
    assert EchoLlm(prefix="Echo -> ").reply_for(user("hi")) == "Echo -> hi"


def test_max_tokens_counts_words() -> None:
    llm = EchoLlm()
    assert llm.complete(user("one two three four"), LlmParams(max_tokens=3)) == "You said: one"
    assert llm.complete(user("one two"), LlmParams(max_tokens=0)) == ""
    assert llm.complete(user("one two"), LlmParams(max_tokens=100)) == "You said: one two"
    assert llm.complete(user("one two"), LlmParams(temperature=0.1)) == "You said: one two"


def test_stop_already_set_yields_nothing() -> None:
    stop = threading.Event()
    stop.set()
    assert list(EchoLlm().stream(user("hello there"), stop=stop)) == []


def test_stop_set_by_the_consumer_ends_the_stream() -> None:
    stop = threading.Event()
    got = []
    for piece in EchoLlm().stream(user("a b c d e"), stop=stop):
        got.append(piece)
        if len(got) == 3:
            stop.set()
    assert got == ["You", " said:", " a"]


def test_the_delay_is_waited_on_the_stop_event_between_words() -> None:
    stop = _RecordingEvent()
    pieces = list(EchoLlm(delay_s=0.25).stream(user("a b"), stop=stop))
    assert pieces == ["You", " said:", " a", " b"]
    assert stop.waits == [0.25, 0.25, 0.25]  # none before the first word


def test_a_stop_during_the_delay_ends_the_echo_at_once() -> None:
    stop = _RecordingEvent(set_after_waits=2)
    pieces = list(EchoLlm(delay_s=30.0).stream(user("a b c"), stop=stop))
    assert pieces == ["You", " said:"]  # the second wait was interrupted by the stop
    assert stop.waits == [30.0, 30.0]


def test_no_delay_never_waits() -> None:
    stop = _RecordingEvent()
    list(EchoLlm().stream(user("a b c"), stop=stop))
    assert stop.waits == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \n\t.")), max_size=30))
def test_the_pieces_join_to_the_reply(text: str) -> None:
    llm = EchoLlm()
    pieces = list(llm.stream(user(text)))
    assert "".join(pieces) == llm.reply_for(user(text)).rstrip()
    assert all(p.strip() and not p[-1].isspace() for p in pieces)  # each piece ends a word
