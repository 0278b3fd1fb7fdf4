"""The VAD contract: audio in, one speech probability per model window out.

A detector is a small recurrent model with per-stream state, so one instance serves one stream at a
time and ``reset`` separates streams (the model stays loaded). Audio arrives in whatever chunks the
transport delivers (20 ms from WebRTC, 40 ms Opus pages, 100 ms from some SDKs); the base class cuts
it into the model's window size so backends only ever see whole windows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from omnivox.audio.pcm import as_float32


class VoiceActivityDetector(ABC):
    """Per-window speech probability in [0, 1]; ``window_samples`` at ``sample_rate``.

    Not thread-safe: one stream, one thread at a time.
    """

    sample_rate: int
    window_samples: int

    def __init__(self) -> None:
        self._pending = np.zeros(0, np.float32)
        self.windows = 0  # windows scored since the last reset

    @property
    def window_ms(self) -> float:
        """Audio time one probability covers."""
        return self.window_samples * 1000.0 / self.sample_rate

    @property
    def audio_ms(self) -> float:
        """Audio time scored since the last reset (the end of the last window)."""
        return self.windows * self.window_ms

    def process(self, audio: np.ndarray) -> np.ndarray:
        """Score ``audio`` (float32 mono at ``sample_rate``, any length).

        Returns one probability per window completed by this chunk (float32, possibly empty); a
        partial window is kept until the next call.
        """
        a = as_float32(audio)
        if len(self._pending):
            a = np.concatenate([self._pending, a])
        n = len(a) // self.window_samples
        probs = self._score_windows(a[: n * self.window_samples].reshape(n, self.window_samples))
        self._pending = a[n * self.window_samples :].copy()
        self.windows += n
        return probs

    def reset(self) -> None:
        """Forget the stream (model state and any partial window); keeps the model loaded."""
        self._pending = np.zeros(0, np.float32)
        self.windows = 0
        self._reset_state()

    def _score_windows(self, windows: np.ndarray) -> np.ndarray:
        """Probabilities of whole windows in stream order (``(n, window_samples)`` float32); a
        backend that can score them in fewer model calls overrides this."""
        probs = np.empty(len(windows), np.float32)
        for i, window in enumerate(windows):
            probs[i] = self._score(np.ascontiguousarray(window))
        return probs

    @abstractmethod
    def _score(self, window: np.ndarray) -> float:
        """Speech probability of one window of exactly ``window_samples`` float32 samples."""

    @abstractmethod
    def _reset_state(self) -> None:
        """Clear the model's recurrent state."""
