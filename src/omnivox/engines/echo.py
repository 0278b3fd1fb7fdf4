"""The echo engine: says the user's last words back, word by word, and says that it is an echo.

It holds the conversation like a real engine, counting one "token" per word, so cache routing and
``cached_tokens`` behave as they would with a model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from omnivox.engines.base import ChatModel, Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities

PREFIX = "(echo)"


def _count(message: ChatMessage) -> int:
    return len(message.text().split()) + 1  # +1 for the role marker


class EchoEngine(Engine, ChatModel):
    name = "echo"
    capabilities = Capabilities(streaming=True)

    @property
    def chat(self) -> ChatModel:
        return self  # it is its own turn-based chat model

    def __init__(self, word_delay_s: float = 0.0) -> None:
        self._messages: list[ChatMessage] = []
        self._tokens = 0
        self._word_delay_s = word_delay_s

    def reset(self) -> None:
        self._messages = []
        self._tokens = 0

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        cached = self._tokens
        new = sum(_count(m) for m in messages)
        self._messages.extend(messages)
        self._tokens += new
        return PrefillStats(self._tokens, len(self._messages), cached, new)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        last_user = next((m for m in reversed(self._messages) if m.role == "user"), None)
        said = last_user.text().strip() if last_user else ""
        words = [PREFIX, *(said.split() or ["(nothing", "to", "echo)"])][: params.max_new_tokens]
        spoken: list[str] = []
        try:
            for word in words:
                if stop.is_set():
                    result.stopped = True
                    break
                if self._word_delay_s:
                    time.sleep(self._word_delay_s)
                delta = word if not spoken else " " + word
                spoken.append(word)
                yield GenChunk(text_delta=delta, tokens=1)
        finally:
            # the reply as far as it went (a consumer may walk away) joins the held conversation
            result.text = " ".join(spoken)
            result.generated_tokens = len(spoken)
            reply = ChatMessage(role="assistant", content=result.text)
            self._messages.append(reply)
            self._tokens += _count(reply)

    @property
    def kv_length(self) -> int:
        return self._tokens

    def held_messages(self) -> list[ChatMessage]:
        return list(self._messages)
