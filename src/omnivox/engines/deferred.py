"""An engine built in ``load()``: the worker is up (and says LOADING) while weights load.

Until then it declares the capabilities it will have (the gateway routes on them) and has no roles;
once loaded it is the engine it built: its roles, its name, its voices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from omnivox.engines.base import ChatModel, Engine
from omnivox.engines.duplex import DuplexModel
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
        self.hears, self.speaks, self.sees = inner.hears, inner.speaks, inner.sees

    @property
    def chat(self) -> ChatModel | None:
        return self._inner.chat if self._inner is not None else None

    @property
    def voice(self) -> VoiceModels | None:
        return self._inner.voice if self._inner is not None else None

    @property
    def duplex(self) -> DuplexModel | None:
        return self._inner.duplex if self._inner is not None else None

    def end_session(self) -> None:
        if self._inner is not None:
            self._inner.end_session()

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
