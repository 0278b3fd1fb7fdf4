"""An engine built in ``load()``: the worker is up (and says LOADING) while weights load."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np

from omnivox.engines.base import Engine, GenChunk, GenerateParams, GenResult, PrefillStats
from omnivox.engines.duplex import DuplexParams, DuplexReady, DuplexUnit
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.workers import Capabilities
from omnivox.voice.models import VoiceModels


class DeferredEngine(Engine):
    def __init__(self, name: str, capabilities: Capabilities, build: Callable[[], Engine]) -> None:
        self.name = name
        self.capabilities = capabilities
        self._build = build
        self._inner: Engine | None = None

    @property
    def inner(self) -> Engine:
        if self._inner is None:
            raise RuntimeError(f"engine {self.name} is not loaded yet")
        return self._inner

    @property
    def interrupt(self) -> threading.Event:
        return self._inner.interrupt if self._inner is not None else super().interrupt

    def load(self) -> None:
        inner = self._build()
        inner.load()
        self._inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.voices = inner.voices

    def reset(self) -> None:
        self.inner.reset()

    def prefill(self, messages: list[ChatMessage]) -> PrefillStats:
        return self.inner.prefill(messages)

    def generate(
        self, params: GenerateParams, stop: threading.Event, result: GenResult
    ) -> Iterator[GenChunk]:
        return self.inner.generate(params, stop, result)

    @property
    def kv_length(self) -> int:
        return self._inner.kv_length if self._inner is not None else 0

    def held_messages(self) -> list[ChatMessage]:
        return self._inner.held_messages() if self._inner is not None else []

    @property
    def voice(self) -> VoiceModels | None:
        return self._inner.voice if self._inner is not None else None

    def duplex_prepare(self, params: DuplexParams) -> DuplexReady:
        return self.inner.duplex_prepare(params)

    def duplex_prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        self.inner.duplex_prefill(audio, frames)

    def duplex_generate(self, force_listen: bool) -> DuplexUnit:
        return self.inner.duplex_generate(force_listen)

    def duplex_finalize(self) -> None:
        self.inner.duplex_finalize()

    def duplex_cleanup(self) -> None:
        if self._inner is not None:
            self._inner.duplex_cleanup()

    def end_session(self) -> None:
        if self._inner is not None:
            self._inner.end_session()

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
