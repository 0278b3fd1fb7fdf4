"""WebRTC's noise suppressor, from the audio processing module in LiveKit's wheel (AEC3's too).

OpenAI Realtime's ``audio.input.noise_reduction`` is ``{"type": "near_field"}`` (a headset or a
phone held close), ``{"type": "far_field"}`` (a laptop's or a room's microphone) or null (off). Both
run WebRTC's suppressor (a statistical noise estimate per frequency band, no network weights to
load) and its high-pass filter (hum and rumble below 80 Hz); ``far_field`` adds its automatic gain
control, since a distant talker comes in quiet. Chosen on measurements (docs/benchmarks.md, "Noise
reduction"): the model ships in a wheel already installed for AEC3, costs a few percent of a core per
session and needs no compiler.

The module processes 10 ms frames; the output lags the input by one frame (10 ms, the stream's
length is kept) plus the suppressor's own overlap (96 samples, 6 ms): 16 ms in all, under the VAD's
32 ms window. Not thread-safe: one stream, one thread (the agent's input thread).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

NoiseReduction = Literal["near_field", "far_field"]
FRAME = 160  # 10 ms at 16 kHz
RATE = 16000


class NoiseSuppressor:
    """One stream's WebRTC noise suppressor for ``kind`` (see the module docstring)."""

    sample_rate = RATE

    def __init__(self, kind: NoiseReduction = "near_field") -> None:
        if kind not in ("near_field", "far_field"):
            raise ValueError(f"noise_reduction must be near_field or far_field, got {kind!r}")
        from livekit import rtc

        self.kind = kind
        self._rtc = rtc
        self._apm = rtc.AudioProcessingModule(
            noise_suppression=True, high_pass_filter=True, auto_gain_control=kind == "far_field"
        )
        self._pending = np.zeros(0, np.float32)
        self._out = np.zeros(FRAME, np.float32)  # one frame of lag: always enough to return
        self.frames = 0  # frames processed

    def process(self, audio: np.ndarray) -> np.ndarray:
        """The next stretch of the stream (float32 mono at 16 kHz), noise suppressed, same length."""
        self._pending = np.concatenate([self._pending, audio.astype(np.float32, copy=False)])
        n = len(self._pending) // FRAME
        parts = [self._out]
        for i in range(n):
            parts.append(self._frame(self._pending[i * FRAME : (i + 1) * FRAME]))
        self._pending = self._pending[n * FRAME :]
        out = np.concatenate(parts)
        self._out = out[len(audio) :]
        return out[: len(audio)]

    def _frame(self, frame: np.ndarray) -> np.ndarray:
        pcm = (np.clip(frame, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
        audio = self._rtc.AudioFrame(pcm, RATE, 1, FRAME)
        self._apm.process_stream(audio)
        self.frames += 1
        return np.frombuffer(bytes(audio.data), np.int16).astype(np.float32) / 32768.0


def build_suppressor(kind: NoiseReduction | None) -> NoiseSuppressor | None:
    """A fresh suppressor for one stream (None: the input is heard as it comes)."""
    return NoiseSuppressor(kind) if kind is not None else None
