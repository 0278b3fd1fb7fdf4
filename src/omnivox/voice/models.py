"""What a voice session needs of its models: ``VoiceModels`` (hear, answer) and their ``VoiceProfile``.

A voice session (``agent``) reaches its models only through this: ``open_listener`` for hearing
(VAD turn detection + streaming ASR, the session's own state) and ``reply`` for answering (LLM ->
words -> sentences -> TTS, ``voice.reply``; ``prefill`` computes a reply's prompt ahead while the
user speaks), with ``profile`` for its defaults. So the models may be
in-process (``voice.stack.VoiceStack``, the cascade) or elsewhere (the staged pipeline's proxies,
``engines.pipeline``).

Both calls block: the agent opens and feeds the listener on its input thread and iterates replies on
its output thread (the threading rule, docs/architecture.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from omnivox.voice.listener import Listener
from omnivox.voice.llm.history import ReplyTemperature
from omnivox.voice.reply import ReplyPiece, ReplyRequest
from omnivox.voice.vad.turn import TurnParams


@dataclass(frozen=True)
class VoiceProfile:
    """What a voice session needs to know of its voice models."""

    system_prompt: str  # instructions when the client gives none
    voices: tuple[str, ...]  # what the TTS can speak with (default first)
    default_voice: str
    context_tokens: int  # the LLM's history budget
    max_reply_tokens: int  # the longest reply
    temperature: ReplyTemperature = field(default_factory=ReplyTemperature)
    tool_calls: bool = False  # the LLM can call functions (an OpenAI-compatible server's ``tools``)
    vision: bool = False  # the LLM sees images (a user message may carry a video frame)
    llm_name: str = "llm"  # which LLM backend (said in warnings about what it cannot do)
    asr_name: str = "asr"  # which speech recogniser transcribes (said when a client names another)

    def resolve_voice(self, voice: str | None) -> str:
        """``voice`` if the TTS has it, else its default (clients ask for OpenAI voice names)."""
        return voice if voice in self.voices else self.default_voice


class VoiceModels(Protocol):
    """A voice session's models (see the module docstring)."""

    def profile(self) -> VoiceProfile:
        """Defaults of the voice models."""
        ...

    def open_listener(
        self, params: TurnParams | None, confirm_ms: float, speculate_at: float | None = 0.3
    ) -> Listener:
        """Hearing for one session: VAD turn detection (``params``; None: manual turns) and
        streaming ASR, flushed early at a pause that has run ``speculate_at`` of the way to the
        turn's end (``voice.listener``). Its state is the session's; the engine's ``end_session``
        resets the models under it."""
        ...

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        """Speak (or write) the reply to ``request.messages`` (see ``voice.reply``)."""
        ...

    def prefill(self, request: ReplyRequest) -> None:
        """Compute the prompt of a reply to come while the user speaks (``request.messages`` ends
        with their words so far; ``ChatLlm.prefill_turn``), on the output thread between replies.
        Models with no state to keep (a remote LLM, the echo LLM) do nothing."""
        ...
