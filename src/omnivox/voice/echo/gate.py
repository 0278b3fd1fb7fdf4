"""An energy gate against the assistant's own echo: quiet input while its reply plays is silenced.

The echo of a reply comes back later than the reference (the playout ledger's leads it: the
network, the client's buffer, the room) and quieter (a speakerphone: -6 to -20 dB). So for each
20 ms of input the gate looks at the loudest 20 ms of reference audio over the last ``window_ms``
(the longest echo delay it covers): input quieter than a threshold times that is taken for echo and
silenced; louder input is the user talking over the reply and passes, and keeps the gate open for
``hold_ms`` (the quieter syllables of the same words are not chopped). With no reference sound in
the window (no reply playing) everything passes untouched.

The threshold starts at ``factor`` (0.7: an echo up to about -3 dB is gated). It then follows how
loud the echo really comes back (``adaptive``): over the last 3 s of frames it silenced, the 95th
percentile of input/loudest-reference is the echo's coupling, and the threshold is ``margin`` (2:
6 dB) above it, never above ``factor`` nor under ``_FLOOR``. With headphones or a browser's own
echo canceller nothing comes back, and a user speaking more softly than the reply still barges in.
Frames that passed (the user) do not teach it, so talking over a reply does not raise it; if most
frames pass for a second, the echo has grown louder (a speaker switched on) and it starts again
from ``factor``.

Chosen on measurements (docs/benchmarks.md, "Own-echo guard"): no convergence to wait for (the
first syllable of the first reply is gated as well as the last), next to no cost, and no reliance
on the echo being a faithful linear copy of the reply (AEC3 let the live echo through).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque

import numpy as np

from omnivox.voice.echo.base import EchoCanceller

FRAME = 320  # 20 ms at 16 kHz
_SILENT = 3e-4  # RMS below this is no sound (about -70 dBFS)
_AUDIBLE = 0.01  # a reply at least this loud (RMS) is heard well enough to learn its echo from
_LEARN = 150  # frames of it the coupling is learnt over (3 s)
_LEARNT = 25  # frames needed before the learnt threshold is used (0.5 s)
_FLOOR = 0.1  # the learnt threshold's least (-20 dB under the reply)
_GREW = 50, 0.75  # this share of this many frames passing: the echo grew louder (a user's barge-in
# pauses the reply within about 300 ms, so a user rarely passes this long over an audible reply)


class EchoGate(EchoCanceller):
    def __init__(
        self,
        factor: float = 0.7,
        window_ms: float = 400.0,
        hold_ms: float = 200.0,
        adaptive: bool = True,
        margin: float = 2.0,
    ) -> None:
        if factor <= 0:
            raise ValueError("factor must be positive")
        self.factor = factor
        self.adaptive = adaptive
        self.margin = margin
        self._window = max(1, round(window_ms * self.sample_rate / 1000 / FRAME))
        self._hold = round(hold_ms * self.sample_rate / 1000)
        self._refs: deque[float] = deque(maxlen=self._window)  # reference RMS per frame, newest last
        self._part = 0  # samples of the current (incomplete) frame already seen
        self._part_ref = 0.0  # their reference energy (sum of squares)
        self._open = 0  # samples the gate stays open for (user speech just passed)
        self._heard = np.zeros(0, np.float32)  # the last 20 ms of input (before gating)
        self._echo: deque[float] = deque(maxlen=_LEARN)  # input / loudest reference of gated frames
        self._echo_sorted: list[float] = []  # the same values in order, kept for the percentile
        self._passed: deque[bool] = deque(maxlen=_GREW[0])  # per audible frame: did it pass?
        self._threshold = factor
        self.gated = 0  # samples silenced so far (for the figures)

    def process(self, near: np.ndarray, reference: np.ndarray) -> np.ndarray:
        if len(near) != len(reference):
            raise ValueError("near and reference must be the same length")
        out = np.asarray(near, np.float32).copy()
        ref = np.asarray(reference, np.float32)
        i = 0
        while i < len(out):
            n = min(FRAME - self._part, len(out) - i)
            self._block(out[i : i + n], ref[i : i + n])
            i += n
        return out

    def threshold(self) -> float:
        """Input under this share of the loudest recent reference frame is echo."""
        return self._threshold

    def loudest(self) -> float:
        """The loudest reference frame's RMS over the window (0: no reply audio)."""
        return max(self._refs, default=0.0)

    def _block(self, near: np.ndarray, ref: np.ndarray) -> None:
        """Gate ``near`` in place: a piece of the current 20 ms frame (frames are stream-aligned)."""
        self._part_ref += float(np.dot(ref, ref))
        self._part += len(near)
        loudest = max(self.loudest(), float(np.sqrt(self._part_ref / self._part)))
        if self._part == FRAME:
            self._refs.append(float(np.sqrt(self._part_ref / FRAME)))
            self._part, self._part_ref = 0, 0.0
        # the input's level over the last 20 ms, this piece included: a chunk that does not end on
        # a frame's edge leaves a piece of a few samples, whose own level is one sample's peak (a
        # 2-sample piece of echo at -6 dB came out at 0.77 of the reply's loudest frame and held
        # the gate open 200 ms: an echo pause, docs/benchmarks.md "Conversation quality, round six")
        heard = np.concatenate((self._heard, near))[-FRAME:]
        self._heard = heard
        if loudest < _SILENT:
            self._open = 0
            return
        level = float(np.sqrt(np.mean(heard * heard))) if len(heard) else 0.0
        if level >= self._threshold * loudest:
            # louder than the echo can be: the user. Held open only over an audible reply (in a
            # reply's fading tail the microphone's own noise would pass as louder)
            self._open = self._hold if loudest >= _AUDIBLE else 0
            passed = True
        elif self._open > 0:
            self._open -= len(near)
            passed = True
        else:
            near[:] = 0.0
            self.gated += len(near)
            passed = False
        if self.adaptive and len(near) == FRAME and loudest >= _AUDIBLE:
            self._learn(passed, level / loudest)

    def _learn(self, passed: bool, ratio: float) -> None:
        self._passed.append(passed)
        if not passed:
            if len(self._echo) == _LEARN:  # the oldest leaves the window
                del self._echo_sorted[bisect_left(self._echo_sorted, self._echo[0])]
            self._echo.append(ratio)
            insort(self._echo_sorted, ratio)
        if len(self._passed) == _GREW[0] and sum(self._passed) > _GREW[1] * _GREW[0]:
            self._echo.clear()  # the echo got louder: start again
            self._echo_sorted.clear()
            self._passed.clear()
        if len(self._echo) < _LEARNT:
            self._threshold = self.factor
            return
        coupling = percentile_of_sorted(self._echo_sorted, 0.95)
        self._threshold = min(self.factor, max(_FLOOR, self.margin * coupling))


def percentile_of_sorted(values: list[float], q: float) -> float:
    """``np.percentile(values, 100 * q)`` (linear, to the last bit) of values already in order.

    The gate asks for it every 20 ms frame while a reply plays; kept in order as they come, the
    window needs two look-ups instead of numpy's sort of a new array (7% of the input thread).
    """
    n = len(values)
    at = (n - 1) * q  # numpy's virtual index for the linear method
    if at >= n - 1:
        return values[-1]
    if at <= 0:
        return values[0]
    below = math.floor(at)
    t = at - below
    a, b = values[below], values[below + 1]
    # numpy's _lerp: from the nearer end, so the result is exact at both ends
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t
