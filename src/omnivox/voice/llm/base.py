"""The chat LLM contract: a conversation in, the reply out as a stream of text deltas.

Blocking by design (HTTP or model work), like every voice component: the cascade engine runs it in
a thread and cancels it with ``stop`` (a ``threading.Event``), checked between deltas, so the stream
ends within one delta of a barge-in. Closing the iterator early also ends the request.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from omnivox.protocol.chat import ChatMessage


@dataclass(frozen=True)
class LlmParams:
    temperature: float | None = None  # None: the backend's default
    max_tokens: int | None = None  # None: no limit beyond the backend's
    top_p: float | None = None
    stop_sequences: tuple[str, ...] = ()
    # function calling (chat completions' shapes): only backends with ``tool_calls`` use them
    tools: tuple[
        dict[str, Any], ...
    ] = ()  # {"type": "function", "function": {name, description, parameters}}
    tool_choice: str | dict[str, Any] | None = (
        None  # "auto" | "none" | "required" | {"type": "function", ...}
    )
    parallel_tool_calls: bool | None = None
    cache_slot: int | None = None  # a runtime with several KV slots: the one that holds this conversation


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a function call the model is writing: the first piece of call ``index`` carries its
    ``call_id`` and ``name``, later ones only more of its JSON ``arguments``."""

    index: int  # which call of this reply (parallel calls have several)
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class Usage:
    """Token counts the backend reported for one reply (None: it reported none)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


LlmEvent = str | ToolCallDelta | Usage


class ChatLlm(ABC):
    """A chat model that streams its reply."""

    name: str = "llm"
    vision: bool = False  # True: image parts of messages are passed to the model
    tool_calls: bool = False  # True: ``params.tools`` reach the model and it may call them

    @abstractmethod
    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[str]:
        """Yield the reply to ``messages`` as text deltas (token-sized pieces, no particular
        boundaries; see ``words.rechunk_to_words``). Ends early, without error, once ``stop`` is set.
        Remote failures raise ``omnivox.core.errors.EngineFailure``."""

    def stream_events(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[LlmEvent]:
        """Like ``stream``, with the function calls the model makes (``ToolCallDelta``) and the token
        counts it reports (``Usage``) among the text deltas. Backends without either only stream."""
        yield from self.stream(messages, params, stop)

    def warm(self, messages: Sequence[ChatMessage]) -> None:  # noqa: B027 - optional hook
        """Compute ``messages`` ahead of a reply that will start with them (a local model keeps
        their keys and values); a remote or stateless backend does nothing."""

    def prefill_turn(  # noqa: B027 - optional hook
        self, messages: Sequence[ChatMessage], params: LlmParams | None = None
    ) -> None:
        """Compute ``messages`` ahead of the reply to them while the user is still speaking: the last
        (user) message holds the words heard so far, and the reply's own call will start with the
        same conversation and more words. A model that keeps its keys and values brings them to this
        conversation (dropping whatever it held past their common start: a discarded reply's words
        are rolled back so), so the reply computes only the words that came after and the prompt's
        tail; a remote or stateless backend does nothing. Blocking, like ``stream``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the model holds (a runtime process, sockets); a remote or stateless backend
        holds nothing."""

    def complete(
        self,
        messages: Sequence[ChatMessage],
        params: LlmParams | None = None,
        stop: threading.Event | None = None,
    ) -> str:
        """The whole reply as one string."""
        return "".join(self.stream(messages, params, stop))


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    """Text of the most recent user message ("" if there is none)."""
    for m in reversed(messages):
        if m.role == "user":
            return m.text().strip()
    return ""
