"""What the assistant's audio sounds like at the user's end, moment by moment: the echo reference.

The server knows what it sent and when, not when the client played it. ``PlayClock`` is the
server's model of one reply's playback: it starts when the first audio is sent and runs in real
time (never ahead of what was sent); a pause freezes it (a client that knows the pause stops its
player there) and a resume continues it from the same point; a stop ends it. That model is the
earliest the audio can play, so the reference it gives leads the real echo (by the network, the
client's buffer and the room), which is what a canceller needs.

``EchoReference`` holds the recent reply audio by its place on its clock and, for a stretch of
microphone audio that arrived at a given moment, gives the reply audio that was playing meanwhile
(16 kHz, zeros where nothing played). The event loop adds audio; the input thread takes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from omnivox.audio.resample import StreamResampler

RATE = 16000
_KEEP_S = 3.0  # audio that finished playing this long ago is forgotten


class PlayClock:
    """One reply's playback at the client as the server models it (seconds on ``clock``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.started_at: float | None = None  # when the sample at offset 0 played (rebased on resume)
        self.sent_ms = 0.0
        self._frozen_ms: float | None = None  # paused at this offset
        self._end_ms: float | None = None  # stopped: nothing from here on plays

    @property
    def paused(self) -> bool:
        return self._frozen_ms is not None

    @property
    def stopped(self) -> bool:
        return self._end_ms is not None

    def start(self) -> None:
        with self._lock:
            if self.started_at is None:
                self.started_at = self.clock()

    def sent(self, ms: float) -> None:
        with self._lock:
            self.sent_ms += ms

    def unsent(self, ms: float) -> None:
        """Audio counted as sent that never left (dropped from the outbox)."""
        with self._lock:
            self.sent_ms = max(0.0, self.sent_ms - ms)

    def ahead_ms(self) -> float:
        """How far what was sent runs ahead of real time since playback began (paced by this)."""
        with self._lock:
            if self.started_at is None:
                return 0.0
            return self.sent_ms - (self.clock() - self.started_at) * 1000

    def played_ms(self) -> float:
        with self._lock:
            return self._played(self.clock())

    def pause(self) -> float:
        """Freeze playback where it is now; returns that offset."""
        with self._lock:
            if self._frozen_ms is None:
                self._frozen_ms = self._played(self.clock())
            return self._frozen_ms

    def resume(self) -> float:
        """Play on from where it paused; returns that offset."""
        with self._lock:
            frozen, self._frozen_ms = self._frozen_ms, None
            if frozen is None:
                return self._played(self.clock())
            self.started_at = self.clock() - frozen / 1000
            return frozen

    def stop(self, at_ms: float | None = None) -> float:
        """Nothing more plays (cancelled, or cut); returns the offset reached: the modelled one, or
        ``at_ms`` where the client said how far it played (never past what was sent)."""
        with self._lock:
            reached = self._played(self.clock()) if at_ms is None else max(0.0, min(at_ms, self.sent_ms))
            self._frozen_ms = None
            self._end_ms = reached
            return reached

    def play_at(self, offset_ms: float) -> float | None:
        """When the audio at ``offset_ms`` plays (None: it does not, as things stand)."""
        with self._lock:
            if self.started_at is None:
                return None
            if self._frozen_ms is not None and offset_ms >= self._frozen_ms:
                return None
            if self._end_ms is not None and offset_ms >= self._end_ms:
                return None
            return self.started_at + offset_ms / 1000

    def _played(self, now: float) -> float:
        if self._end_ms is not None:
            return self._end_ms
        if self._frozen_ms is not None:
            return self._frozen_ms
        if self.started_at is None:
            return 0.0
        return max(0.0, min(self.sent_ms, (now - self.started_at) * 1000))


class EchoReference:
    def __init__(self, rate: int = RATE) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._pieces: list[tuple[PlayClock, float, np.ndarray]] = []  # (clock, offset ms, audio)
        self._resamplers: dict[int, StreamResampler] = {}
        self._offsets: dict[int, float] = {}  # per clock: offset of the next resampled sample

    def add(self, clock: PlayClock, offset_ms: float, audio: np.ndarray, rate: int) -> None:
        """Reply audio (at ``rate``) that plays from ``offset_ms`` on ``clock``."""
        key = id(clock)
        with self._lock:
            if key not in self._resamplers:
                self._resamplers[key] = StreamResampler(rate, self.rate)
                self._offsets[key] = offset_ms
            out = self._resamplers[key].process(audio)
            if len(out):
                self._pieces.append((clock, self._offsets[key], out))
                self._offsets[key] += len(out) * 1000 / self.rate

    def take(self, arrival: float, n: int) -> np.ndarray:
        """The reply audio that played during the ``n`` samples of microphone audio that arrived
        (complete) at ``arrival``."""
        out = np.zeros(n, np.float32)
        start = arrival - n / self.rate
        with self._lock:
            keep = []
            for clock, offset, audio in self._pieces:
                at = clock.play_at(offset)
                if at is None:
                    if not clock.stopped:  # not started yet, or paused: it may still play
                        keep.append((clock, offset, audio))
                    continue
                lo = round((at - start) * self.rate)
                a, b = max(lo, 0), min(lo + len(audio), n)
                if a < b:
                    out[a:b] += audio[a - lo : b - lo]
                if at + len(audio) / self.rate >= arrival - _KEEP_S:
                    keep.append((clock, offset, audio))
            self._pieces = keep
            live = {id(c) for c, _, _ in keep}
            for key in [k for k in self._resamplers if k not in live]:
                del self._resamplers[key], self._offsets[key]
        return out
