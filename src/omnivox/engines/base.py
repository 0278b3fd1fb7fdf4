"""The Engine contract: what a worker hosts, as role objects.

A worker owns exactly one engine and serves one session at a time. An engine is what it loads (once,
in ``load``) and up to three roles, one per kind of session; what it can serve (its
``Capabilities``) follows from which roles it has (``capabilities_of``):

- ``chat``: a ``ChatModel`` for turn-based streaming: the conversation it holds and its cache
  (``prefill`` incremental on what the cache holds, ``generate`` a reply), reused across turns;
- ``voice``: ``VoiceModels`` (``voice.models``) for voice sessions, realtime and duplex over voice
  models (the agent hears with them and answers with them);
- ``duplex``: a ``DuplexModel`` (``engines.duplex``) that decides each unit of a full-duplex
  session itself (MiniCPM-o, tiny).

The threading rule (docs/architecture.md): model calls block, so none runs on the event loop. The
``chat`` and ``duplex`` roles, ``load`` and ``end_session`` run in the worker's one engine thread
(``worker.host``), one call at a time, so they need no locking of their own; the ``voice`` role's
listener and replies run on the session's agent's own input and output threads.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from omnivox.engines.duplex import DuplexModel
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


class ChatModel(ABC):
    """Turn-based streaming: a conversation held with its cache, one turn after another."""

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


class Engine:
    """One model (or cascade of models) that a worker hosts: what it loads, and its roles."""

    name: str = "engine"
    # what it serves once loaded, declared so while it loads (the gateway routes on it); the worker
    # reports ``capabilities_of`` the loaded engine from then on
    capabilities: Capabilities = Capabilities()
    voices: tuple[str, ...] = ()
    # what its own models take in and give out, besides voice models (which hear and speak)
    hears: bool = False
    speaks: bool = False
    sees: bool = False

    @property
    def interrupt(self) -> threading.Event:
        """Set by the worker when the session ends while the engine may still be working for it
        (a long prefill whose client left): long calls check it between chunks of work and raise
        ``Interrupted``. The worker clears it before the next session."""
        event = self.__dict__.get("_interrupt")
        if event is None:
            event = self.__dict__["_interrupt"] = threading.Event()
        return event

    def load(self) -> None:
        """Load weights. Called once per worker process, in the engine thread, before any session."""

    # ---- the roles (None: the engine has none)

    @property
    def chat(self) -> ChatModel | None:
        """Turn-based streaming."""
        return None

    @property
    def voice(self) -> VoiceModels | None:
        """The voice models voice sessions hear and answer with."""
        return None

    @property
    def duplex(self) -> DuplexModel | None:
        """A model that decides each unit of a full-duplex session itself."""
        return None

    def end_session(self) -> None:
        """A session ended, however it ended: drop per-session stream state (a decoder that was
        mid-utterance), keep the conversation cache (the next turn may be a cache hit)."""

    def close(self) -> None:
        """Release resources at worker shutdown."""


def capabilities_of(engine: Engine) -> Capabilities:
    """What a loaded engine serves, from the roles it has."""
    voice = engine.voice
    profile = voice.profile() if voice is not None else None
    return Capabilities(
        streaming=engine.chat is not None,
        realtime=voice is not None,
        duplex=engine.duplex is not None or voice is not None,  # duplex over voice models: the agent
        audio_in=voice is not None or engine.hears,
        audio_out=voice is not None or engine.speaks,
        vision=engine.sees or (profile is not None and profile.vision),
    )
