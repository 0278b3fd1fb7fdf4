"""The echo canceller contract: the microphone and the audio the assistant played, echo removed.

A canceller hears one stream, in step with a reference (what the assistant's audio played at the
same moments, as far as the server knows): ``process(near, reference)`` takes equal lengths of both
(float32 mono at 16 kHz) and returns the near-end audio with the echo of the reference taken out.
The reference must not lag the echo: the canceller searches delays forwards (the echo comes after
the sound that caused it), a few hundred milliseconds at most. Not thread-safe: one stream, one
thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class EchoCanceller(ABC):
    sample_rate: int = 16000

    @abstractmethod
    def process(self, near: np.ndarray, reference: np.ndarray) -> np.ndarray:
        """``near`` with the echo of ``reference`` removed (same length as ``near``)."""

    def close(self) -> None:  # noqa: B027 (a backend with nothing to release need not override)
        """Release what the canceller holds."""
