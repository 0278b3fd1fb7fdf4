"""A caller's speaker and microphone: the reply plays in real time, and comes back into the microphone.

``Speakerphone`` is driven by the microphone's clock: each chunk the caller records, the speaker plays
the next stretch of reply audio (unless paused), and the microphone picks up what the speaker played
``delay_ms`` earlier, attenuated by ``gain_db`` (a speakerphone: -6 to -20 dB, 30-150 ms), plus
whatever the caller says. A client that knows omnivox's extension pauses its player on
``omnivox.interruption.paused`` and plays on at ``.resumed``; every client drops a cancelled reply's
unplayed audio. Shared by ``bench conversation`` and the integration tests.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class Speakerphone:
    def __init__(self, rate: int = 24000, delay_ms: float = 80.0, gain_db: float = -10.0) -> None:
        self.rate = rate
        self.delay = int(rate * delay_ms / 1000)
        self.gain = 10 ** (gain_db / 20) if gain_db > -120 else 0.0
        self._queue: deque[tuple[str, np.ndarray]] = deque()  # (response id, audio) to play
        self._history = np.zeros(self.delay, np.float32)  # the speaker's last ``delay`` samples
        self.paused = False
        self.played: dict[str, int] = {}  # samples played per response

    @property
    def playing(self) -> bool:
        return bool(self._queue) and not self.paused

    @property
    def queued(self) -> int:
        return sum(len(a) for _, a in self._queue)

    def play(self, response_id: str, audio: np.ndarray) -> None:
        self._queue.append((response_id, audio.astype(np.float32, copy=False)))

    def left(self, response_id: str) -> int:
        """Samples of ``response_id`` still queued to play."""
        return sum(len(a) for r, a in self._queue if r == response_id)

    def holds(self, response_id: str) -> bool:
        """Whether audio of ``response_id`` is still queued to play."""
        return any(r == response_id for r, _ in self._queue)

    def drop(self, response_id: str) -> None:
        """A cancelled reply: what has not played yet never will."""
        self._queue = deque((r, a) for r, a in self._queue if r != response_id)

    def record(self, voice: np.ndarray) -> np.ndarray:
        """The microphone's next chunk: ``voice`` (what the caller says) plus the speaker's echo."""
        n = len(voice)
        out = np.zeros(n, np.float32)
        got = 0
        while got < n and self._queue and not self.paused:
            rid, audio = self._queue[0]
            take = min(n - got, len(audio))
            out[got : got + take] = audio[:take]
            self.played[rid] = self.played.get(rid, 0) + take
            got += take
            if take == len(audio):
                self._queue.popleft()
            else:
                self._queue[0] = (rid, audio[take:])
        speaker = np.concatenate([self._history, out])
        echo = speaker[:n] * self.gain  # what played ``delay`` samples ago
        self._history = speaker[n:]
        return (voice + echo).astype(np.float32)
