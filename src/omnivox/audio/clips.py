"""Whole audio clips carried inside JSON messages: base64 in one of a few formats -> float32 samples.

Chat messages may carry audio parts (a recorded question, a reference voice). Each names its format;
this is the one place that turns such a part into samples, so every entry point rejects the same bad
input with the same ``InvalidAudio``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from omnivox.audio.pcm import b64decode, from_float32_bytes, from_pcm16
from omnivox.audio.resample import resample
from omnivox.audio.wav import read_wav

ClipFormat = Literal["pcm16", "wav", "float32"]


def decode_clip(data: str, fmt: ClipFormat, sample_rate: int) -> tuple[np.ndarray, int]:
    """Base64 ``data`` -> (float32 mono samples, their rate). A WAV's own header gives its rate."""
    raw = b64decode(data)
    if fmt == "wav":
        return read_wav(raw)
    if fmt == "float32":
        return from_float32_bytes(raw), sample_rate
    return from_pcm16(raw), sample_rate


def decode_clip_at(data: str, fmt: ClipFormat, sample_rate: int, target_rate: int) -> np.ndarray:
    """``decode_clip`` resampled to ``target_rate`` (unsupported rates raise ``InvalidAudio``)."""
    audio, rate = decode_clip(data, fmt, sample_rate)
    return resample(audio, rate, target_rate)
