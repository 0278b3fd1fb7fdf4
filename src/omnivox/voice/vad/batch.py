"""Several streams' VAD windows in one model call, when they are ready at the same moment.

Each stream's detector runs in its own session's input thread, and a light worker process with
seats has several of them; the model call costs mostly its fixed part (a window of one stream
~110-340 us, eight streams' windows ~380 us in one call: docs/benchmarks.md), so windows that are
ready together are scored together. Nothing waits for windows to come: a thread that asks while no
call runs scores its own windows at once (a stream alone is scored exactly as before, with no
added wait); one that asks while a call runs waits for that call (it could not have run sooner on
the cores that call is using), and the next call takes every window that asked meanwhile. One of
the waiting threads runs it, so there is no thread of its own to wake.

The batch dimension is the streams: a stream's recurrent state is its row of the batched state,
taken back after the call, and its context (the audio before its window the model hears) is its
row's head. Rows are independent in the graph, so a stream's scores are the same as alone (float
rounding aside) whatever else is in the call, and one stream's bad audio (NaN, inf) stays in its
own row. A stream with several windows ready gives one per call, in order. Nothing is kept between
calls: a stream that ends holds no row.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class BatchedModel(Protocol):
    def run(self, inputs: np.ndarray, state: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities (streams,) and the next state (2, streams, 128) of one window per stream."""
        ...


class BatchedStream(Protocol):
    """A detector's side of a batched call: its rate and window, its recurrent state and context."""

    sample_rate: int
    window_samples: int
    context_samples: int
    state: np.ndarray  # (2, 1, 128)
    # (1, context_samples + window_samples): the model's input for the stream's next window, whose
    # head holds the stream's context (the end of the window before)
    inputs: np.ndarray


@dataclass
class _Ask:
    stream: BatchedStream
    windows: np.ndarray  # (n, window_samples) in stream order
    probs: np.ndarray | None = None  # set once scored
    error: BaseException | None = None  # the call's, if it failed
    done: bool = False


class SileroBatch:
    """Scores the windows of the streams that ask at the same moment in one model call (see the
    module docstring). Safe from any thread; ``score`` returns once the asker's windows are scored."""

    def __init__(self, model: BatchedModel) -> None:
        self.model = model
        self._changed = threading.Condition(threading.Lock())
        self._asks: list[_Ask] = []  # asked and not yet taken by a call
        self._busy = False  # a thread is running a call
        self.calls = 0  # model calls made, and stream-windows scored in them (rows / calls: the
        self.rows = 0  # mean batch)

    @property
    def asking(self) -> int:
        """Streams that asked and wait for the next call."""
        with self._changed:
            return len(self._asks)

    def score(self, stream: BatchedStream, windows: np.ndarray) -> np.ndarray:
        """Probabilities of ``stream``'s next ``windows`` ((n, window_samples) float32, in order)."""
        if not len(windows):
            return np.zeros(0, np.float32)
        with self._changed:
            alone = not self._busy and not self._asks
            if alone:
                self._busy = True
        if alone:  # (most calls: nothing else asks now) no bookkeeping, as a detector of its own
            try:
                return self._score_alone(stream, windows)
            finally:
                with self._changed:
                    self._busy = False
                    if self._asks:
                        self._changed.notify_all()
        ask = _Ask(stream, windows)
        with self._changed:
            self._asks.append(ask)
            while self._busy and not ask.done:
                self._changed.wait()
            if not ask.done:  # nothing runs: this thread scores every window that has asked
                asks, self._asks = self._asks, []
                self._busy = True
        if not ask.done:
            try:
                self._run(asks)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
        if ask.error is not None:
            raise ask.error
        assert ask.probs is not None
        return ask.probs

    def _score_alone(self, stream: BatchedStream, windows: np.ndarray) -> np.ndarray:
        probs = np.empty(len(windows), np.float32)
        inputs, head = stream.inputs, stream.context_samples
        for i, window in enumerate(windows):
            inputs[0, head:] = window
            scored, stream.state = self.model.run(inputs, stream.state, stream.sample_rate)
            inputs[0, :head] = window[-head:]
            probs[i] = scored[0]
        self.calls += len(windows)
        self.rows += len(windows)
        return probs

    def _run(self, asks: list[_Ask]) -> None:
        """Score every ask (grouped by rate: the model takes one rate a call), then mark each done;
        a failed call fails only the asks that were in it."""
        groups: dict[int, list[_Ask]] = {}
        for ask in asks:
            groups.setdefault(ask.stream.sample_rate, []).append(ask)
        try:
            for rate, group in groups.items():
                try:
                    self._score_group(rate, group)
                except Exception as error:  # (onnxruntime's own errors have no common base)
                    for ask in group:
                        ask.error = error
        finally:
            for ask in asks:
                if ask.error is None and ask.probs is None:
                    ask.error = RuntimeError("the VAD call was interrupted")
                ask.done = True

    def _score_group(self, rate: int, asks: list[_Ask]) -> None:
        """One call per window index: the i-th window of every stream with more than i of them."""
        for ask in asks:
            ask.probs = np.empty(len(ask.windows), np.float32)
        depth = max(len(ask.windows) for ask in asks)
        for i in range(depth):
            rows = [ask for ask in asks if len(ask.windows) > i]
            stream = rows[0].stream
            width = stream.context_samples + stream.window_samples
            inputs = np.empty((len(rows), width), np.float32)
            for r, ask in enumerate(rows):
                inputs[r, : ask.stream.context_samples] = ask.stream.inputs[0, : ask.stream.context_samples]
                inputs[r, ask.stream.context_samples :] = ask.windows[i]
            state = np.concatenate([ask.stream.state for ask in rows], axis=1)
            probs, next_state = self.model.run(inputs, state, rate)
            self.calls += 1
            self.rows += len(rows)
            for r, ask in enumerate(rows):
                assert ask.probs is not None
                ask.probs[i] = probs[r]
                ask.stream.state = np.ascontiguousarray(next_state[:, r : r + 1, :])
                ask.stream.inputs[0, : ask.stream.context_samples] = ask.windows[i][
                    -ask.stream.context_samples :
                ]
