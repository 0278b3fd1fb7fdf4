"""A fake duplex engine for session-layer tests: scripted decisions, every call recorded (no model).

It stands in for a model so the worker's duplex session (state machine, unit loop, barrier,
merging, cleanup) can be tested in-process and fast; the real engines (tiny, cascade) are tested
on their own and end to end.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from omnivox.core.errors import EngineFailure, InvalidAudio
from omnivox.engines.base import Engine
from omnivox.engines.duplex import DuplexModel, DuplexParams, DuplexReady, DuplexUnit
from omnivox.protocol.control.workers import Capabilities


class FakeDuplexEngine(Engine, DuplexModel):
    """Speaks ``say`` (one word per unit it is not forced to listen, 0.1 s of a tone each) from
    unit ``speak_from`` on, then listens.

    ``calls`` records ("prepare" | "prefill" | "generate" | "finalize" | "cleanup", detail) in
    order; ``unit_s`` makes each prefill take that long (a slow model); ``gate`` (when given) holds
    every prefill until it is set; ``fail_at`` makes that unit's prefill raise ``fail_with``.
    """

    name = "fake-duplex"
    capabilities = Capabilities(streaming=False, duplex=True, audio_in=True, audio_out=True, vision=True)

    def __init__(
        self,
        say: str = "hello there friend",
        speak_from: int = 0,
        vision: bool = True,
        unit_s: float = 0.0,
        finalize_s: float = 0.0,
    ) -> None:
        self.words = say.split()
        self.speak_from = speak_from
        self.vision = vision
        self.unit_s = unit_s
        self.finalize_s = finalize_s
        self.calls: list[tuple[str, object]] = []
        self.params: DuplexParams | None = None
        self.gate: threading.Event | None = None
        self.fail_at: int | None = None
        self.fail_with: Exception = EngineFailure("the model failed")
        self.units = 0
        self.said = 0  # words spoken so far
        self.kv = 0
        self.finalizing = False  # a finalize is running (the barrier test reads it from a prefill)
        self.prefill_during_finalize = False

    # ---- duplex: it is its own duplex model

    @property
    def duplex(self) -> DuplexModel:
        return self

    def prepare(self, params: DuplexParams) -> DuplexReady:
        self.calls.append(("prepare", params.system_prompt))
        self.params = params
        self.units = 0
        self.said = 0
        self.kv = len(params.system_prompt.split())
        notes = () if self.vision else ("frames are accepted and ignored",)
        return DuplexReady(vision=self.vision, notes=notes)

    def prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        if self.finalizing:
            self.prefill_during_finalize = True
        if audio.dtype != np.float32 or audio.ndim != 1:
            raise InvalidAudio("bad audio")
        self.calls.append(("prefill", (len(audio), len(frames))))
        if self.gate is not None:
            self.gate.wait(10)
        if self.unit_s:
            time.sleep(self.unit_s)
        if self.fail_at is not None and self.units == self.fail_at:
            self.units += 1
            raise self.fail_with
        self.kv += 1 + len(frames) + len(audio) // 1600

    def generate(self, force_listen: bool) -> DuplexUnit:
        index = self.units
        self.units += 1
        self.calls.append(("generate", force_listen))
        spoken = self.said
        if force_listen or index < self.speak_from or spoken >= len(self.words):
            self.kv += 1
            return DuplexUnit(is_listen=True)
        self.said += 1
        word = self.words[spoken]
        self.kv += 2
        t = np.arange(2400, dtype=np.float32) / 24000
        audio = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        return DuplexUnit(
            is_listen=False,
            text=(" " if spoken else "") + word,
            audio=audio,
            end_of_turn=spoken == len(self.words) - 1,
            tokens=1,
        )

    def finalize(self) -> None:
        self.finalizing = True
        if self.finalize_s:
            time.sleep(self.finalize_s)
        self.calls.append(("finalize", None))
        self.finalizing = False

    def cleanup(self) -> None:
        self.calls.append(("cleanup", None))
        self.params = None
        self.kv = 0

    @property
    def kv_length(self) -> int:
        return self.kv

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]
