"""The chat LLM contract: params, complete() as the joined stream, the last user text."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence

import pytest

from omnivox.protocol.chat import AudioPart, ChatMessage, ImagePart, TextPart
from omnivox.voice.llm.base import ChatLlm, LlmParams, last_user_text


def msg(role: str, content) -> ChatMessage:
    return ChatMessage(role=role, content=content)


class _Scripted(ChatLlm):
    """Streams fixed deltas and records what it was given."""

    def __init__(self, deltas: list[str]) -> None:
        self.deltas = deltas
        self.seen: list[tuple] = []

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        self.seen.append((list(messages), params, stop))
        for d in self.deltas:
            if stop is not None and stop.is_set():
                return
            yield d


def test_params_default_to_the_backend_and_are_immutable() -> None:
    p = LlmParams()
    assert (p.temperature, p.max_tokens, p.top_p, p.stop_sequences) == (None, None, None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.temperature = 0.5  # type: ignore[misc]
    assert LlmParams(temperature=0.2) == LlmParams(temperature=0.2)
    assert hash(LlmParams(stop_sequences=("\n",))) == hash(LlmParams(stop_sequences=("\n",)))


def test_class_defaults() -> None:
    assert ChatLlm.name == "llm" and ChatLlm.vision is False
    with pytest.raises(TypeError):
        ChatLlm()  # type: ignore[abstract]


def test_complete_joins_the_stream_and_passes_everything_through() -> None:
    llm = _Scripted(["Hel", "lo", " there", "!"])
    params, stop = LlmParams(max_tokens=5), threading.Event()
    history = [msg("user", "hi")]
    assert llm.complete(history, params, stop) == "Hello there!"
    assert llm.seen == [(history, params, stop)]


def test_complete_of_a_stopped_stream_is_empty() -> None:
    stop = threading.Event()
    stop.set()
    assert _Scripted(["a", "b"]).complete([msg("user", "x")], stop=stop) == ""


def test_last_user_text_is_the_most_recent_user_message_stripped() -> None:
    history = [
        msg("system", "be brief"),
        msg("user", "  first question  "),
        msg("assistant", "an answer"),
        msg("user", "  second question\n"),
        msg("assistant", "another answer"),
    ]
    assert last_user_text(history) == "second question"


def test_last_user_text_of_parts_joins_the_text_parts_only() -> None:
    content = [
        TextPart(text="look at"),
        ImagePart(data="iVBORw0"),
        AudioPart(data="AAAA"),
        TextPart(text="this"),
    ]
    assert last_user_text([msg("user", content)]) == "look at this"


@pytest.mark.parametrize(
    "history",
    [[], [msg("system", "prompt")], [msg("assistant", "hello")], [msg("user", [ImagePart(data="x")])]],
)
def test_no_user_text_is_an_empty_string(history) -> None:
    assert last_user_text(history) == ""
