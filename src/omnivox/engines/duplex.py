"""What a full-duplex session asks of a duplex model: MiniCPM-o's per-unit listen/speak loop.

A duplex session is a stream of units (about a second each). A ``DuplexModel`` (an engine's
``duplex`` role) decides each unit itself; for every unit the worker calls, in the engine's thread
and strictly in order:

1. ``prefill(audio, frames)``: hear the unit's audio (16 kHz float32 mono) and, in omni mode, see
   its video frames (RGB uint8 arrays, height x width x 3); the model feeds them into whatever state
   it keeps (a KV cache);
2. ``generate(force_listen)``: decide to listen or to speak, and if speaking say up to
   ``max_new_speak_tokens`` tokens (text and, with ``generate_audio``, 24 kHz audio);
3. ``finalize()``: close the unit (feed terminators, trim the cache to ``max_kv_tokens``); with
   deferred finalize the worker sends the unit's result first and runs this after, but always
   before the next unit's prefill.

``prepare`` starts a session (system prompt, reference audio, sampling settings) and ``cleanup``
ends it however it ended (stop, a vanished client, a pause that timed out): it must be safe to call
twice and without a prepare, and leave the model ready for the next one. (An engine with voice
models and no duplex model serves duplex sessions through the voice agent instead:
``worker.duplex.agent_units``.)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np

DuplexMode = Literal["audio", "omni"]
INPUT_SAMPLE_RATE = 16000  # what a unit hears


@dataclass(frozen=True)
class DuplexParams:
    """A duplex session's settings, as the engine sees them (the wire config, validated)."""

    system_prompt: str = ""
    mode: DuplexMode = "audio"
    generate_audio: bool = True
    chunk_ms: int = 1000  # the audio each unit carries
    max_new_speak_tokens: int = 20  # per unit
    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20
    listen_prob_scale: float = 1.0  # > 1: more inclined to listen; < 1: to speak
    max_kv_tokens: int | None = None  # finalize trims the cache to this (None: the engine's own limit)
    voice: str | None = None  # a TTS voice (None: the engine's default)
    ref_audio: np.ndarray | None = None  # 16 kHz reference audio for the model's own voice prompt
    tts_ref_audio: np.ndarray | None = None  # 16 kHz reference audio for the speech synthesiser
    seed: int | None = None  # sampling seed (None: the engine's own)


@dataclass(frozen=True)
class DuplexReady:
    """What ``prepare`` reports back to the client in ``prepared``."""

    vision: bool  # the frames of omni mode are seen (False: accepted and ignored)
    notes: tuple[str, ...] = ()  # what the client should know (e.g. why frames are ignored)


@dataclass
class DuplexUnit:
    """One unit's decision (``generate``)."""

    is_listen: bool
    text: str = ""  # what was said in this unit ("" when listening)
    audio: np.ndarray | None = None  # float32 mono at 24 kHz (None: no audio this unit)
    end_of_turn: bool = False  # the assistant's turn ended with this unit (finished or cut off)
    tokens: int = 0  # tokens generated in this unit


class DuplexModel(ABC):
    """A model that decides each unit of a full-duplex session (see the module docstring)."""

    @abstractmethod
    def prepare(self, params: DuplexParams) -> DuplexReady:
        """Start a session: forget any previous one, take the prompt and settings."""

    @abstractmethod
    def prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        """Hear one unit's audio (16 kHz float32) and see its frames (RGB uint8 HxWx3; omni)."""

    @abstractmethod
    def generate(self, force_listen: bool) -> DuplexUnit:
        """Decide this unit: listen, or speak (up to the session's speak tokens per unit)."""

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Close the unit (terminators, cache trimming); runs before the next unit's prefill."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook
        """End the session however it ended; safe to call twice or without a prepare."""

    @property
    def kv_length(self) -> int:
        """Tokens the session's cache holds (reported with each unit)."""
        return 0
