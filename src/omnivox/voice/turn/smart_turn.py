"""Pipecat's smart-turn v3.2: an end-of-turn classifier on a Whisper-tiny encoder, CPU ONNX (8.7 MB).

The model ships in the ``pipecat-ai`` wheel, which omnivox installs without its dependencies: only the
ONNX file is used, run with onnxruntime. Its input is what Whisper's feature extractor makes of the
last 8 s of the user's audio, as pipecat prepares it:

- the last 8 s at 16 kHz; a shorter clip gets zeros in front (the speech stays at the end, where the
  model looks for the cut);
- the 8 s normalised to zero mean and unit variance;
- an 80-band log-mel spectrogram: 400-sample periodic Hann frames every 160 samples, centred (the
  signal reflected by 200 samples at each end), power spectrum, Slaney mel filters over 0-8 kHz with
  Slaney area normalisation, log10 floored at 1e-10; the last of the 801 frames dropped (800 left),
  values floored 8 below the maximum, then (x + 4) / 4;
- shape (1, 80, 800) float32 in, one number out: the probability that the turn is finished (the
  graph ends in a sigmoid although its output is called "logits").

``log_mel_features`` computes this in numpy; the test suite checks it against the reference that
pipecat ships next to the model.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from omnivox.audio.pcm import as_float32
from omnivox.voice.packaged import SMART_TURN_V3_ONNX
from omnivox.voice.turn.base import EndOfTurnModel

SAMPLE_RATE = 16000
WINDOW_S = 8
N_SAMPLES = SAMPLE_RATE * WINDOW_S
N_FFT = 400
HOP = 160
N_MELS = 80
N_FRAMES = N_SAMPLES // HOP  # 800


def _hz_to_mel(hz: float | np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear (3 mels per 200 Hz) below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    log_part = 15.0 + np.log(np.maximum(hz, 1e-12) / 1000.0) * (27.0 / np.log(6.4))
    return np.where(hz < 1000.0, hz * 3.0 / 200.0, log_part)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    log_part = 1000.0 * np.exp((mel - 15.0) * (np.log(6.4) / 27.0))
    return np.where(mel < 15.0, mel * 200.0 / 3.0, log_part)


def mel_filterbank(n_mels: int = N_MELS, n_fft: int = N_FFT, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Triangular Slaney-normalised mel filters, shape (n_mels, n_fft // 2 + 1)."""
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(rate / 2.0), n_mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / rate)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    return triangles * (2.0 / (upper - lower))  # each filter's area is the same


_FILTERS = mel_filterbank()
_HANN = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic, as torch.hann_window


def last_window(audio_16k: np.ndarray) -> np.ndarray:
    """The last 8 s of ``audio_16k``, zero-padded at the front to exactly 8 s."""
    a = as_float32(audio_16k)
    if len(a) >= N_SAMPLES:
        return a[-N_SAMPLES:]
    return np.concatenate([np.zeros(N_SAMPLES - len(a), dtype=np.float32), a])


def log_mel_features(window: np.ndarray) -> np.ndarray:
    """Whisper-style normalised log-mel features of one 8 s window: float32 (80, 800)."""
    x = np.asarray(window, dtype=np.float32)
    if x.shape != (N_SAMPLES,):
        raise ValueError(f"expected {N_SAMPLES} samples (8 s at 16 kHz), got shape {x.shape}")
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    padded = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]  # (801, 400)
    power = np.abs(np.fft.rfft(frames * _HANN, axis=1)) ** 2  # (801, 201)
    mel = np.log10(np.maximum(power @ _FILTERS.T, 1e-10))[:-1].T  # (80, 800)
    mel = np.maximum(mel, mel.max() - 8.0)
    return ((mel + 4.0) / 4.0).astype(np.float32)


class SmartTurn(EndOfTurnModel):
    """smart-turn v3.2 on onnxruntime; ``threads`` is onnxruntime's intra-op thread count."""

    name = "smart-turn-v3.2"
    loads = 0  # sessions created in this process

    def __init__(self, model_path: str | Path | None = None, *, threads: int = 1) -> None:
        path = Path(model_path) if model_path is not None else SMART_TURN_V3_ONNX.path()
        self.model_path = path
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input = self._session.get_inputs()[0].name
        SmartTurn.loads += 1
        self.calls = 0
        self.seconds = 0.0  # time spent in probability_finished, features included

    def probability_finished(self, audio_16k: np.ndarray) -> float:
        began = time.perf_counter()
        features = log_mel_features(last_window(audio_16k))[None]
        (out,) = self._session.run(None, {self._input: features})
        p = float(np.asarray(out).reshape(-1)[0])
        self.calls += 1
        self.seconds += time.perf_counter() - began
        return min(1.0, max(0.0, p))
