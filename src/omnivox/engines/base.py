"""The Engine contract: what a worker hosts.

A worker owns exactly one engine and serves one session at a time, so an engine is not thread-safe
and needs no locking of its own; the worker calls it from one thread at a time. Every method here
may block (model calls), so the worker runs them in a thread, never on the event loop.

Three kinds of session use an engine: turn-based streaming (``prefill`` / ``generate`` on the
conversation the engine holds, its KV cache reused across turns), voice sessions (realtime), and
full-duplex sessions (a listen/speak decision every unit, see ``engines.duplex``). A voice session
hears through ``open_listener`` (VAD + streaming ASR) and speaks through ``reply`` (LLM
-> words -> sentences -> TTS), with ``voice_profile`` for its defaults. A voice session reaches its
models only through these methods, so an engine may keep them in-process (cascade) or elsewhere
(a staged pipeline).
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
from omnivox.voice.listener import Listener
from omnivox.voice.llm.history import ReplyTemperature
from omnivox.voice.reply import ReplyPiece, ReplyRequest
from omnivox.voice.vad.turn import TurnParams

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


@dataclass(frozen=True)
class VoiceProfile:
    """What a voice session needs to know of an engine's voice models."""

    system_prompt: str  # instructions when the client gives none
    voices: tuple[str, ...]  # what the TTS can speak with (default first)
    default_voice: str
    context_tokens: int  # the LLM's history budget
    max_reply_tokens: int  # the longest reply
    temperature: ReplyTemperature = field(default_factory=ReplyTemperature)
    tool_calls: bool = False  # the LLM can call functions (an OpenAI-compatible server's ``tools``)
    llm_name: str = "llm"  # which LLM backend (said in warnings about what it cannot do)
    asr_name: str = "asr"  # which speech recogniser transcribes (said when a client names another)

    def resolve_voice(self, voice: str | None) -> str:
        """``voice`` if the TTS has it, else its default (clients ask for OpenAI voice names)."""
        return voice if voice in self.voices else self.default_voice


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

    def voice_profile(self) -> VoiceProfile:
        """Defaults of the voice models. Raises ``WorkerUnavailable`` without any."""
        raise WorkerUnavailable(f"engine {self.name} has no voice models for voice sessions")

    def open_listener(self, params: TurnParams | None, confirm_ms: float) -> Listener:
        """Hearing for one voice session: VAD turn detection (``params``; None: manual turns) and
        streaming ASR. Its state is the session's; ``end_session`` resets the models under it."""
        raise WorkerUnavailable(f"engine {self.name} has no voice models for voice sessions")

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        """Speak (or write) the reply to ``request.messages`` (see ``voice.reply``)."""
        raise WorkerUnavailable(f"engine {self.name} has no voice models for voice sessions")

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
