"""Which echo canceller a session hears through: ``none``, ``gate`` (the default) or ``aec3``."""

from __future__ import annotations

from omnivox.core.config import EchoKind
from omnivox.voice.echo.base import EchoCanceller


def build_canceller(kind: EchoKind, gate_factor: float = 0.7) -> EchoCanceller | None:
    """A fresh canceller for one stream (None: the input is heard as it comes)."""
    if kind == "gate":
        from omnivox.voice.echo.gate import EchoGate

        return EchoGate(factor=gate_factor)
    if kind == "aec3":
        from omnivox.voice.echo.webrtc import WebRtcEchoCanceller

        return WebRtcEchoCanceller()
    if kind == "none":
        return None
    raise ValueError(f"unknown echo canceller {kind!r}")
