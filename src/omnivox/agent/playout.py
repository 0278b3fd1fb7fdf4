"""The playout ledger: what the assistant sent, what played at the listener's end, what they heard.

One session has one ``Playout``; each reply has one ``Playback`` in it. Everything that asks "what
did the user hear?" reads it, and only it writes a reply's sentences and where each begins:

- ``PlayClock``: the server's model of one reply's playback. The server knows what it sent and when,
  not when the client played it: the clock starts when the first audio is sent and runs in real time
  (never ahead of what was sent); a pause freezes it (a client that knows the pause stops its
  player there) and a resume continues it from the same point; a stop ends it. That model is the
  earliest the audio can play, so the reference it gives leads the real echo (by the network, the
  client's buffer and the room), which is what a canceller needs. Where the listener reports its
  player (a WebRTC call's track, a carrier's marks, a client's ``output_audio_buffer`` reports:
  ``heard_started`` / ``heard_stopped``), the reports correct it: playback counts from when the
  player began, and ends when it says it has played everything.
- ``EchoReference``: the recent reply audio by its place on its clock; for a stretch of microphone
  audio that arrived at a given moment, the reply audio that was playing meanwhile (16 kHz, zeros
  where nothing played). The event loop adds audio; the input thread takes it.
- ``Playback``: one reply's audio (sent, played, paused, stopped), its sentences and where each
  begins, and from them the words heard by any point: whole sentences played, plus the played share
  of the one that was cut.
- ``Playout``: the session's ledger: the echo reference, and the reply on the floor (the one
  speaking, or the last one heard, whose audio may still play): whether it is still playing, how
  much of it is left to play and the words the user may just have heard (what the echo guard
  compares the recogniser's words with). Once the listener has reported its playback, a reply plays
  until the listener says it stopped (the model's end alone does not end it: the player may have run
  dry or buffer more than modelled), or ``REPORT_GRACE_S`` past the model's end should that report
  be lost. A listener that does not report plays a reply a little past the model's end (the network
  both ways and its player's buffer): ``played_out_s`` says how long ago the model's end was, so
  speech that began before the listener's player really stopped is still judged as speech over the
  reply (``agent.interruption``'s ``player_lag_ms``).

Writers run on the event loop; the input thread reads the echo reference (locked) and nothing else.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from omnivox.audio.resample import StreamResampler

RATE = 16000
_KEEP_S = 3.0  # audio that finished playing this long ago is forgotten
# a listener that reports its playback and has not said it stopped plays on this long past the
# model's end at most (its report may be lost; a player behind the model by more is broken)
REPORT_GRACE_S = 2.0


class PlayClock:
    """One reply's playback at the client as the server models it (seconds on ``clock``).

    With ``waits_for_audio`` the player is modelled as waiting when it runs out of audio: audio
    sent after it ran dry plays from when it is sent (a duplex client, whose units hand it audio
    at most a unit at a time). Without, playback is counted from the first audio as if it never ran
    dry (a realtime client, sent audio ahead of time)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, waits_for_audio: bool = False) -> None:
        self.clock = clock
        self.waits_for_audio = waits_for_audio
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
            if self.waits_for_audio and self.started_at is not None and self._frozen_ms is None:
                behind_s = self.clock() - self.started_at - self.sent_ms / 1000
                if behind_s > 0:  # it ran dry: this plays from now
                    self.started_at += behind_s
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

    def heard_started(self, at: float) -> float:
        """The listener's player reports it began this reply at ``at`` (on ``clock``): playback
        counts from then where that is later than modelled (the network, a gateway's or a carrier's
        buffer). Returns how much later than modelled it began (ms; negative: earlier, which moves
        nothing, the model being the earliest it can; 0 once paused or stopped, which a report that
        late does not move either)."""
        with self._lock:
            if self.started_at is None or self._frozen_ms is not None or self._end_ms is not None:
                return 0.0
            late_s = at - self.started_at
            self.started_at = max(self.started_at, at)
            return late_s * 1000

    def heard_stopped(self) -> float:
        """The listener's player reports it has played all of this reply: nothing of it plays any
        more. Returns how long after the model's end that is (ms; negative: before it)."""
        with self._lock:
            now = self.clock()
            modelled = self._modelled_end()
            if self._end_ms is None:
                self._frozen_ms = None
                self._end_ms = self.sent_ms
            return (now - modelled) * 1000 if modelled is not None else 0.0

    def modelled_end(self) -> float | None:
        """When the audio sent so far has all played, as modelled (None: not started, or paused)."""
        with self._lock:
            return self._modelled_end()

    def _modelled_end(self) -> float | None:
        if self.started_at is None or self._frozen_ms is not None:
            return None
        return self.started_at + (self.sent_ms if self._end_ms is None else self._end_ms) / 1000

    def play_at(self, offset_ms: float) -> float | None:
        """When the audio at ``offset_ms`` plays (None: it does not, as things stand)."""
        started_at, cutoff_ms = self.schedule()
        if started_at is None or (cutoff_ms is not None and offset_ms >= cutoff_ms):
            return None
        return started_at + offset_ms / 1000

    def schedule(self) -> tuple[float | None, float | None]:
        """``play_at`` for every offset in one read: (when offset 0 plays, or None: nothing plays;
        the offset from which nothing plays, paused or stopped there, or None: all that is sent)."""
        with self._lock:
            if self.started_at is None:
                return None, None
            cutoffs = [ms for ms in (self._frozen_ms, self._end_ms) if ms is not None]
            return self.started_at, min(cutoffs, default=None)

    def _played(self, now: float) -> float:
        if self._end_ms is not None:
            return self._end_ms
        if self._frozen_ms is not None:
            return self._frozen_ms
        if self.started_at is None:
            return 0.0
        return max(0.0, min(self.sent_ms, (now - self.started_at) * 1000))


class _Track:
    """One clock's reference audio: its pieces in the order sent, each starting where the one before
    ends on the clock, so those that play over a stretch of microphone audio are found by bisection
    (a reply's pieces number its 100 ms frames, and every 40 ms chunk heard reads the reference)."""

    def __init__(self, clock: PlayClock, resampler: StreamResampler, offset_ms: float) -> None:
        self.clock = clock
        self.resampler = resampler
        self.next_ms = offset_ms  # where the next resampled sample plays on the clock
        self.offsets: list[float] = []  # where each piece starts (ms on the clock), ascending
        self.audio: list[np.ndarray] = []

    def add(self, out: np.ndarray, rate: int) -> None:
        if len(out):
            self.offsets.append(self.next_ms)
            self.audio.append(out)
            self.next_ms += len(out) * 1000 / rate

    def mix(self, out: np.ndarray, start: float, arrival: float, rate: int) -> None:
        """Add what played between ``start`` and ``arrival`` into ``out`` (at ``start``), and forget
        the pieces that finished playing ``_KEEP_S`` before ``arrival`` or never will (stopped)."""
        started_at, cutoff_ms = self.clock.schedule()
        offsets, audio = self.offsets, self.audio
        if started_at is None:  # not started (nothing of it plays yet), or stopped before it did
            if self.clock.stopped:
                del offsets[:], audio[:]
            return
        playable = len(offsets) if cutoff_ms is None else bisect.bisect_left(offsets, cutoff_ms)
        if self.clock.stopped:  # what lies past the stop never plays
            del offsets[playable:], audio[playable:]
        # the pieces that may overlap [start, arrival), a piece to spare each side (rounding)
        first = max(0, bisect.bisect_right(offsets, (start - started_at) * 1000, 0, playable) - 2)
        last = min(playable, bisect.bisect_left(offsets, (arrival - started_at) * 1000, 0, playable) + 1)
        n = len(out)
        for k in range(first, last):
            lo = round((started_at + offsets[k] / 1000 - start) * rate)
            a, b = max(lo, 0), min(lo + len(audio[k]), n)
            if a < b:
                out[a:b] += audio[k][a - lo : b - lo]
        gone, forget_before = 0, arrival - _KEEP_S
        while gone < playable and started_at + offsets[gone] / 1000 + len(audio[gone]) / rate < forget_before:
            gone += 1
        del offsets[:gone], audio[:gone]


class EchoReference:
    def __init__(self, rate: int = RATE) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._tracks: dict[PlayClock, _Track] = {}  # per reply's clock, in the order first sent

    def add(self, clock: PlayClock, offset_ms: float, audio: np.ndarray, rate: int) -> None:
        """Reply audio (at ``rate``) that plays from ``offset_ms`` on ``clock``."""
        with self._lock:
            track = self._tracks.get(clock)
            if track is None:
                track = self._tracks[clock] = _Track(clock, StreamResampler(rate, self.rate), offset_ms)
            track.add(track.resampler.process(audio), self.rate)

    def take(self, arrival: float, n: int) -> np.ndarray:
        """The reply audio that played during the ``n`` samples of microphone audio that arrived
        (complete) at ``arrival``."""
        out = np.zeros(n, np.float32)
        start = arrival - n / self.rate
        with self._lock:
            for clock, track in list(self._tracks.items()):
                track.mix(out, start, arrival, self.rate)
                if not track.offsets:  # all of it forgotten (its resampler with it)
                    del self._tracks[clock]
        return out

    def held(self) -> int:
        """How many pieces of reply audio it holds (what is forgotten is not held)."""
        with self._lock:
            return sum(len(track.offsets) for track in self._tracks.values())


class Playback:
    """One reply's audio at the listener's end (see the module docstring)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        reference: EchoReference | None = None,
        waits_for_audio: bool = False,
    ) -> None:
        self.clock = PlayClock(clock, waits_for_audio)
        self._reference = reference
        self._spans: list[tuple[float, str]] = []  # (where a sentence starts in ms, its text)
        self._bound_ms: float | None = None  # truncated: nothing past this was heard

    # ---- the reply, as it sends (event loop)

    def sentence(self, text: str) -> int:
        """A spoken sentence starts at the audio sent so far; returns its index in the reply."""
        self._spans.append((self.clock.sent_ms, text))
        return len(self._spans) - 1

    def send(self, audio: np.ndarray, rate: int) -> float:
        """Audio (at ``rate``) goes out now: the clock starts with the first; returns its length (ms)."""
        self.clock.start()
        ms = len(audio) * 1000 / rate
        if self._reference is not None:
            self._reference.add(self.clock, self.clock.sent_ms, audio, rate)
        self.clock.sent(ms)
        return ms

    def unsent(self, ms: float) -> None:
        """Audio counted as sent that never left (dropped before it went out)."""
        self.clock.unsent(ms)

    # ---- the listener's side

    def pause(self) -> float:
        return self.clock.pause()

    def resume(self) -> float:
        return self.clock.resume()

    def stop(self, at_ms: float | None = None) -> float:
        """Nothing more plays; returns where it stopped (see ``PlayClock.stop``)."""
        return self.clock.stop(at_ms)

    def truncate(self, heard_ms: float) -> str:
        """Keep only what was heard up to ``heard_ms``: its words (returned), and the audio's length
        (later truncations are bounded by it)."""
        text = self.heard_text(heard_ms)
        self._bound_ms = min(self.audio_ms, heard_ms)
        self._spans = [(start, said) for start, said in self._spans if start < heard_ms]
        return text

    # ---- reading it

    @property
    def started(self) -> bool:
        return self.clock.started_at is not None

    @property
    def paused(self) -> bool:
        return self.clock.paused

    @property
    def sent_ms(self) -> float:
        return self.clock.sent_ms

    @property
    def audio_ms(self) -> float:
        """The reply's audio as far as it counts: what was sent, or what was heard once truncated."""
        sent = self.clock.sent_ms
        return sent if self._bound_ms is None else min(sent, self._bound_ms)

    @property
    def spans(self) -> tuple[tuple[float, str], ...]:
        """Where each spoken sentence starts (ms into the reply's audio) and its text."""
        return tuple(self._spans)

    @property
    def text(self) -> str:
        """Every sentence that was spoken (or, once truncated, begun before the cut)."""
        return " ".join(said for _, said in self._spans)

    def played_ms(self) -> float:
        return self.clock.played_ms()

    def ahead_ms(self) -> float:
        return self.clock.ahead_ms()

    def left_ms(self) -> float:
        """Audio sent that the listener has yet to play."""
        return max(0.0, self.audio_ms - self.clock.played_ms())

    def playing(self, reported: bool = False) -> bool:
        """Whether the listener may still be playing this reply: it has audio left to play, as
        modelled; or, with ``reported`` (the listener reports its playback), it has not said it
        stopped yet, up to ``REPORT_GRACE_S`` past the modelled end."""
        if self.left_ms() > 0:
            return True
        end = self.clock.modelled_end()
        if not reported or self.clock.stopped or end is None or self.audio_ms <= 0:
            return False
        return self.clock.clock() - end < REPORT_GRACE_S

    def played_out_s(self, at: float) -> float | None:
        """How long before ``at`` (on its clock) this reply finished playing as modelled (0: it was
        still playing then; None: it is paused or stopped, or never played)."""
        end = self.clock.modelled_end()
        if end is None or self.clock.stopped or self.audio_ms <= 0:
            return None
        return max(0.0, at - end)

    def ends_in_s(self, at: float) -> float | None:
        """How long after ``at`` this reply finishes playing as modelled (0: it had already; None:
        it is paused or stopped, or never played)."""
        end = self.clock.modelled_end()
        if end is None or self.clock.stopped or self.audio_ms <= 0:
            return None
        return max(0.0, end - at)

    def heard_text(self, heard_ms: float) -> str:
        """The words of the sentences heard in the first ``heard_ms``, the last one cut at its share."""
        words: list[str] = []
        for start, end, said in self._sentences(self.audio_ms):
            if start >= heard_ms:
                break
            share = 1.0 if end <= start else min(1.0, (heard_ms - start) / (end - start))
            sentence = said.split()
            words += sentence[: math.ceil(len(sentence) * share)]
        return " ".join(words)

    def recent_text(self, window_ms: float) -> str:
        """The sentences the listener may have heard in the last ``window_ms`` of what played."""
        played = self.clock.played_ms()
        return " ".join(
            said
            for start, end, said in self._sentences(self.clock.sent_ms)
            if start <= played and end >= played - window_ms
        )

    def _sentences(self, end_ms: float) -> Iterator[tuple[float, float, str]]:
        """(start, end, text) of each sentence; the last one ends at ``end_ms``."""
        spans = self._spans
        for n, (start, said) in enumerate(spans):
            yield start, spans[n + 1][0] if n + 1 < len(spans) else end_ms, said


class Playout:
    """The session's ledger of reply audio (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, waits_for_audio: bool = False) -> None:
        self.clock = clock
        self.waits_for_audio = waits_for_audio  # the listener's player waits when it runs dry
        self.reference = EchoReference()
        self.current: Playback | None = None  # the reply on the floor: speaking, or the last heard
        self.reported = False  # the listener reports its playback (``heard_started``/``_stopped``)

    def playback(self) -> Playback:
        """A new reply's playback, on this ledger's clock and echo reference."""
        return Playback(self.clock, self.reference, self.waits_for_audio)

    def hold(self, playback: Playback) -> None:
        """``playback``'s reply has the floor now (it speaks)."""
        self.current = playback

    def forget(self, playback: Playback) -> None:
        """``playback``'s audio plays no more (cut, or truncated by the client)."""
        if self.current is playback:
            self.current = None

    def expect_reports(self) -> None:
        """The listener says it reports its playback before its first report (it has the audio
        queued and will say when it starts): from now on the ledger waits for its reports."""
        self.reported = True

    def heard(self, playback: Playback, started: bool, at: float) -> float:
        """The listener reports that its player ``started`` ``playback`` at ``at`` (else: it has
        played it all); from now on the ledger waits for such reports. Returns the model's error
        (ms: how much later the player began, or how long after the modelled end it stopped)."""
        self.reported = True
        return playback.clock.heard_started(at) if started else playback.clock.heard_stopped()

    def playing(self) -> bool:
        """Whether the reply on the floor may still be playing at the listener (``Playback.playing``)."""
        return self.current is not None and self.current.playing(self.reported)

    def played_out_s(self, at: float | None = None) -> float | None:
        """How long before ``at`` (default: now) the reply on the floor finished playing as modelled,
        for a listener that does not report its playback (``Playback.played_out_s``; None: it still
        plays, none is on the floor, or the listener reports, and its reports say when it stopped)."""
        if self.reported or self.current is None:
            return None
        return self.current.played_out_s(self.clock() if at is None else at)

    def ends_in_s(self, at: float | None = None) -> float | None:
        """How long after ``at`` (default: now) the reply on the floor finishes playing as modelled,
        for a listener that does not report its playback (``Playback.ends_in_s``; None: none is on
        the floor, it is paused, or the listener reports its playback)."""
        if self.reported or self.current is None:
            return None
        return self.current.ends_in_s(self.clock() if at is None else at)

    def left_s(self) -> float:
        """Seconds of the reply on the floor the listener has yet to play."""
        return self.current.left_ms() / 1000 if self.current is not None else 0.0

    def spoken_recently(self, window_ms: float = 8000.0) -> str:
        """The assistant's words the user may have heard in the last ``window_ms`` of its audio."""
        return self.current.recent_text(window_ms) if self.current is not None else ""

    def echo(self, arrival: float, n: int) -> np.ndarray:
        """The reply audio that played during ``n`` samples of microphone audio that arrived at
        ``arrival`` (16 kHz; input thread)."""
        return self.reference.take(arrival, n)
