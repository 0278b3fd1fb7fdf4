"""What every simulated voice caller of the benchmarks shares, whatever server it calls.

A caller is paced as a person: its microphone never stops (``Microphone``: each chunk leaves once
it has been "recorded", in real time), it says a sentence synthesised by hibari (``speech_clip``),
keeps the microphone open on silence until the reply has been heard (played out in real time),
pauses (``--pause-s``) and says the next (``converse``): never one turn straight after another, so
a machine under N callers carries the load N people put on it, and the tables say so (``pacing``).
``ReplyTimer`` times each reply as the caller hears it:

- "v2v": from the moment the turn's last speech sample was captured to the arrival of the reply's
  first audio;
- "heard": to the moment the reply's first sound (a sample that is not silence) plays. The reply
  plays from its first audio on, each chunk after the one before or, when a chunk arrives after the
  one before has finished playing, on arrival (a player that ran dry waits for it); so a server
  that sends audio faster than real time and one that paces it are heard the same way.
- "dry": how long the player ran dry inside a reply, after its first audio (a chunk that arrived
  more than ``DRY_SLACK_S`` after the one before had finished playing): the gaps the listener
  hears when the rest of a reply is written or spoken slower than its start plays.

``bench realtime`` (the Realtime API's events), ``bench peer`` (those and pipecat's frames) and
``bench telephony`` feed the same clock and timer, so their figures compare.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

RATE = 24000  # hibari's rate, and the Realtime API's PCM16
LOUD = 300  # PCM16: a sample past this is sound, not silence (about -40 dBFS)
PAUSE_S = 0.5  # the pause before the next sentence once a reply has been heard (the benches' default)
DRY_SLACK_S = 0.02  # a chunk this late is jitter, not a gap the listener hears
REPLY_TIMEOUT_S = 20.0  # from the end of a turn's clip to the reply's first audio
PLAY_TIMEOUT_S = 120.0  # from the end of a turn's clip until the reply has been heard
SENTENCES = (
    "what is the weather like in paris today",
    "can you tell me a short story about a fox",
    "please remind me to call my sister tomorrow",
    "how long does it take to boil an egg",
)

Clip = tuple[np.ndarray, float]  # float32 speech and where the speech ends in it (seconds)


@dataclass
class CallerStats:
    """What one caller measured over its call."""

    v2v_s: list[float] = field(default_factory=list)  # to the reply's first audio
    heard_s: list[float] = field(default_factory=list)  # to the reply's first sound
    dry_s: list[float] = field(default_factory=list)  # each reply's gaps after its first audio
    errors: list[str] = field(default_factory=list)
    turn_marks: list[dict[str, float]] = field(default_factory=list)  # each reply's breakdown (ms)


def speech_clip(text: str, rate: int = RATE) -> Clip:
    """Speech for ``text`` (hibari's voice, fixed seed) at ``rate`` and where the speech ends in it."""
    from omnivox.voice.tts.hibari import HibariTts

    audio = np.concatenate([c.audio for c in HibariTts(seed=1).synthesize(text)])
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    end_s = (loud[-1] + 1) / RATE if len(loud) else len(audio) / RATE
    return resample_clip((audio, end_s), rate)


def resample_clip(clip: Clip, rate: int) -> Clip:
    """``clip`` (at hibari's 24 kHz) at ``rate``: the same speech, ending at the same moment."""
    audio, end_s = clip
    if rate == RATE:
        return clip
    import soxr

    return soxr.resample(audio, RATE, rate).astype(np.float32), end_s


class Microphone:
    """Streams audio as a microphone records it: ``chunk_ms`` at a time, each chunk sent as soon as
    its last sample has been "captured" on the caller's clock, which starts when this is made.

    ``noise_db``: the microphone's own noise floor (white noise at this RMS, dBFS) under everything
    it sends, speech and silence; None: its silence is digital zeros."""

    def __init__(
        self,
        send: Callable[[np.ndarray], Awaitable[None]],
        rate: int,
        chunk_ms: int,
        noise_db: float | None = None,
    ) -> None:
        self.rate = rate
        self.step = rate * chunk_ms // 1000  # samples per chunk
        self._send = send
        self.start = time.monotonic()
        self.sent = 0  # samples sent: the microphone's clock
        self._noise = None if noise_db is None else 10 ** (noise_db / 20)
        self._rng = np.random.default_rng()

    def clock(self) -> float:
        """The wall time (monotonic) at which the next sample sent is captured."""
        return self.start + self.sent / self.rate

    async def play(self, audio: np.ndarray) -> None:
        """Stream ``audio`` in real time; returns once its last chunk has left."""
        for i in range(0, len(audio), self.step):
            chunk = audio[i : i + self.step]
            if self._noise is not None:
                chunk = chunk + self._rng.standard_normal(len(chunk), np.float32) * np.float32(self._noise)
            self.sent += len(chunk)
            await asyncio.sleep(max(0.0, self.clock() - time.monotonic()))
            await self._send(chunk)


class ReplyTimer:
    """Times replies as the caller hears them (see the module docstring) and says when one has
    been heard. A caller feeds it what its server sends: ``reply_started`` where the protocol says
    a reply begins (or not: the first audio after a finished reply begins the next), ``audio`` for
    every chunk of reply audio, ``reply_finished`` where it says the reply is over."""

    def __init__(self, stats: CallerStats, rate: int = RATE) -> None:
        self.stats = stats
        self.rate = rate
        self.speech_end: float | None = None  # when the speech of the turn awaiting a reply ended
        self.reply_done = asyncio.Event()
        self.playing_until = 0.0  # when the last reply finishes playing
        self._first_audio: float | None = None  # arrival of this reply's first audio
        self._heard_from: float | None = None  # the speech end its first sound is still to be timed from
        self._play_end = 0.0  # when the audio received so far finishes playing
        self._dry = 0.0  # this reply's gaps so far

    def expect_reply(self, speech_end: float) -> None:
        """A turn whose speech ends at ``speech_end`` (monotonic) is being said; known before its
        clip has all been sent, since a reply may start before the clip's trailing silence has."""
        self.speech_end = speech_end
        self.reply_done.clear()

    def reply_started(self) -> None:
        self._first_audio = None
        self._heard_from = None

    def audio(self, pcm: np.ndarray, now: float) -> None:
        """A chunk of reply audio (PCM16 samples at ``rate``) arrived at ``now``."""
        if self._first_audio is None:
            self._first_audio = self._play_end = now
            self._dry = 0.0
            if self.speech_end is not None:
                self.stats.v2v_s.append(now - self.speech_end)
                self._heard_from, self.speech_end = self.speech_end, None
        elif now > self._play_end + DRY_SLACK_S:
            self._dry += now - self._play_end
        plays_at = max(now, self._play_end)
        loud = np.nonzero(np.abs(pcm) > LOUD)[0]
        if self._heard_from is not None and len(loud):
            self.stats.heard_s.append(plays_at + loud[0] / self.rate - self._heard_from)
            self._heard_from = None
        self._play_end = plays_at + len(pcm) / self.rate

    def reply_finished(self, now: float) -> None:
        """The server says the reply is over; it has been heard once it has played out."""
        self.playing_until = self._play_end if self._first_audio is not None else now
        if self._first_audio is not None:
            self.stats.dry_s.append(self._dry)
        self.reply_done.set()
        self.reply_started()

    def heard(self, now: float) -> bool:
        """Whether the last reply is over and has finished playing at ``now``."""
        return self.reply_done.is_set() and now >= self.playing_until


def add_pacing_argument(parser: argparse.ArgumentParser) -> None:
    """``--pause-s``: how long a caller pauses once a reply has been heard."""
    parser.add_argument(
        "--pause-s",
        type=float,
        default=PAUSE_S,
        help="callers pause this long after a reply has played out before the next sentence",
    )


def add_mic_noise_argument(parser: argparse.ArgumentParser) -> None:
    """``--mic-noise-db``: the callers' microphone noise floor (None: digital silence)."""
    parser.add_argument(
        "--mic-noise-db",
        type=float,
        help="callers' microphones add white noise at this RMS (dBFS, e.g. -60) under everything "
        "they send; default: their silence is digital zeros",
    )


def mic_noise(noise_db: float | None) -> str:
    """What the callers' microphones send in their silence, as the table titles say it."""
    return "silence as digital zeros" if noise_db is None else f"a {noise_db:g} dBFS noise floor"


def pacing(pause_s: float) -> str:
    """How the callers are paced, as the benches' table titles say it."""
    return (
        "callers paced as people (microphone in real time, each sentence "
        f"{pause_s:g} s after the reply to the one before has played out)"
    )


async def converse(
    mic: Microphone, timer: ReplyTimer, clips: Sequence[Clip], turns: int, pause_s: float = PAUSE_S
) -> None:
    """Say ``turns`` sentences from ``clips`` (at the microphone's rate) into ``mic``, each ``pause_s``
    after the reply to the one before has been heard, keeping the microphone open on silence. A
    turn whose reply has not begun within ``REPLY_TIMEOUT_S``, or not been heard within
    ``PLAY_TIMEOUT_S``, or that the server calls answered before any of the reply's audio reached
    the caller, is an error, and the next turn follows."""
    quiet = np.zeros(mic.step, np.float32)
    for turn in range(turns):
        clip, speech_end_s = clips[turn % len(clips)]
        timer.expect_reply(mic.clock() + speech_end_s)
        await mic.play(clip)
        began = time.monotonic()
        while not timer.heard(now := time.monotonic()):
            if timer.speech_end is not None and now > began + REPLY_TIMEOUT_S:
                timer.stats.errors.append(f"timeout: no reply within {REPLY_TIMEOUT_S:.0f} s")
                break
            if now > began + PLAY_TIMEOUT_S:
                timer.stats.errors.append(f"timeout: reply not over within {PLAY_TIMEOUT_S:.0f} s")
                break
            await mic.play(quiet)
        else:
            if timer.speech_end is not None:  # a reply "over" before any of its audio came
                timer.stats.errors.append("reply over without audio")
                timer.speech_end = None
        await mic.play(np.zeros(int(mic.rate * pause_s), np.float32))
