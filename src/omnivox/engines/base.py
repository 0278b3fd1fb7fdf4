"""The Engine contract: what a worker hosts.

A worker owns exactly one engine and serves one session at a time, so an engine is not thread-safe
and needs no locking of its own; the worker calls it from one thread at a time. Every method here
may block (model calls), so the worker runs them in a thread, never on the event loop.

Three kinds of session use an engine: turn-based streaming (``prefill`` / ``generate`` on the
conversation the engine holds, its KV cache reused across turns), voice sessions (realtime, and
duplex over voice models), and full-duplex sessions on a model that decides each unit itself (see
``engines.duplex``). A voice session reaches its models only through the engine's ``voice``
(``voice.models.VoiceModels``: hear, answer, the profile), so an engine may keep them in-process
(cascade) or elsewhere (a staged pipeline); the session's agent runs them on its own input and
output threads (the threading rule, docs/architecture.md).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from omnivox.core.errors import WorkerUnavailable
from omnivox.engines.duplex import DuplexParams, DuplexReady, DuplexUnit
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.models import VoiceModels

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

    @property
    def interrupt(self) -> threading.Event:
        """Set by the worker when the session ends while the engine may still be working for it
        (a long prefill whose client left): long calls check it between chunks of work and raise
        ``Interrupted``. The worker clears it before the next session."""
        event = self.__dict__.get("_interrupt")
        if event is None:
            event = self.__dict__["_interrupt"] = threading.Event()
        return event

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

    # ---- voice sessions (engines whose capabilities include ``realtime``)

    @property
    def voice(self) -> VoiceModels | None:
        """The voice models voice sessions hear and answer with (None: the engine has none)."""
        return None

    # ---- full-duplex sessions (engines whose capabilities include ``duplex``; see engines.duplex)

    def duplex_prepare(self, params: DuplexParams) -> DuplexReady:
        """Start a duplex session: forget any previous one, take the prompt and settings."""
        raise WorkerUnavailable(f"engine {self.name} cannot serve duplex sessions")

    def duplex_prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        """Hear one unit's audio (16 kHz float32) and see its frames (RGB uint8 HxWx3; omni)."""
        raise WorkerUnavailable(f"engine {self.name} cannot serve duplex sessions")

    def duplex_generate(self, force_listen: bool) -> DuplexUnit:
        """Decide this unit: listen, or speak (up to the session's speak tokens per unit)."""
        raise WorkerUnavailable(f"engine {self.name} cannot serve duplex sessions")

    def duplex_finalize(self) -> None:  # noqa: B027 - optional hook
        """Close the unit (terminators, cache trimming); runs before the next unit's prefill."""

    def duplex_cleanup(self) -> None:  # noqa: B027 - optional hook
        """End the duplex session however it ended; safe to call twice or without a prepare."""

    def end_session(self) -> None:  # noqa: B027 - optional hook
        """A session ended, however it ended: drop per-session stream state (a decoder that was
        mid-utterance), keep the conversation cache (the next turn may be a cache hit)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources at worker shutdown."""
