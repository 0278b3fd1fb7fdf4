"""The Engine contract: what a worker hosts.

A worker owns exactly one engine and serves one session at a time, so an engine is not thread-safe
and needs no locking of its own; the worker calls it from one thread at a time. Every method here
may block (model calls), so the worker runs them in a thread, never on the event loop.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.workers import Capabilities
from omnivox.voice.stack import VoiceStack

OUTPUT_SAMPLE_RATE = 24000


@dataclass(frozen=True)
class PrefillStats:
    prompt_length: int  # tokens held in the cache after this prefill
    message_count: int  # messages the engine holds
    cached_tokens: int  # tokens that were already in the cache and reused
    input_tokens: int  # tokens this prefill had to compute
    transcripts: tuple[str, ...] = ()  # what was heard in the audio parts of the prefilled messages


@dataclass(frozen=True)
class GenerateParams:
    max_new_tokens: int = 256
    temperature: float | None = None  # None: the engine's default (greedy for local models)
    generate_audio: bool = False
    voice: str | None = None  # None: the engine's default voice


@dataclass
class GenChunk:
    text_delta: str = ""
    audio: np.ndarray | None = None  # float32 mono at OUTPUT_SAMPLE_RATE
    tokens: int = 0  # tokens generated for this chunk


@dataclass
class GenResult:
    """Filled in by ``generate`` as it runs; read once the iterator is exhausted."""

    text: str = ""  # the reply as it is now held in the engine's history
    generated_tokens: int = 0
    stopped: bool = False
    extra: dict[str, float] = field(default_factory=dict)


class Engine(ABC):
    """One model (or cascade of models) that a worker hosts."""

    name: str = "engine"
    capabilities: Capabilities = Capabilities()
    voices: tuple[str, ...] = ()

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load weights. Called once per worker process, in a thread, before any session."""

    @abstractmethod
    def reset(self) -> None:
        """Forget the held conversation and its cache."""

    @abstractmethod
    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        """Append ``messages`` to the held conversation, computing only what the cache lacks."""

    @abstractmethod
    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        """Stream the assistant's reply to the held conversation.

        Checks ``stop`` between chunks and ends within one chunk of it being set. When the iterator
        ends, the reply (complete or cut short) is part of the held conversation and ``result`` says
        what was produced.
        """

    @property
    def kv_length(self) -> int:
        """Tokens currently held in the cache."""
        return 0

    def held_messages(self) -> list[ChatMessage]:
        """The conversation the cache holds (the worker hashes it for cache-aware routing)."""
        return []

    @property
    def voice(self) -> VoiceStack | None:
        """The loaded voice models, for engines that have them (realtime sessions use them)."""
        return None

    def end_session(self) -> None:  # noqa: B027 - optional hook
        """A session ended, however it ended: drop per-session stream state (a decoder that was
        mid-utterance), keep the conversation cache (the next turn may be a cache hit)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources at worker shutdown."""
