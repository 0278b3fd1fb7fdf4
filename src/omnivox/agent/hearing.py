"""Hearing: the agent's audio-ordered jobs, run through its input thread one at a time, in order.

Audio, commits, clears and turn-detection changes must reach the listener in the order the adapter
gave them (a commit covers exactly the audio fed before it), so they share one queue of typed jobs.
The listener's work (VAD + ASR) blocks, so it runs in the agent's input thread; the time it takes
and the audio it covers are counted for the real-time factor the gateway reports.

With an echo canceller (``voice.echo``: the energy gate by default, AEC3, or none), each chunk is
heard together with the reply audio that was playing while it was recorded (the playout ledger's
echo reference, ``agent.playout``), so the listener hears the microphone without that echo.
``Echo`` jobs change the canceller in order with the audio; ``Denoise`` jobs the noise suppressor
(``noise_reduction``: ``voice.noise``), which hears the input after the canceller.

Chunks that wait one behind the other are heard in one trip to the input thread (``take_feeds``,
``feed``): each trip wakes the thread and then the loop, and on a busy machine each wake-up finds
the models' memory cold (a 40 ms chunk costs the light worker ~1.3 ms of Silero paced, ~0.3 ms when
several are heard back to back: docs/benchmarks.md). Nothing waits for a chunk to come: a trip takes
what has already arrived, so a caller in real time still has each chunk heard alone the moment it
comes, and only a worker that has fallen behind hears several at once (catching up sooner). A trip
stops after the first chunk the listener heard something in (or that failed): turn-taking acts on it
before the next chunk is heard, as when each went alone; the chunks after it wait for the next trip.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from omnivox.agent.playout import Playout
from omnivox.agent.threads import SerialThread
from omnivox.core.config import EchoKind
from omnivox.core.errors import OmnivoxError
from omnivox.voice.echo.choice import build_canceller
from omnivox.voice.listener import Heard, Listener
from omnivox.voice.noise.suppressor import NoiseReduction, build_suppressor
from omnivox.voice.stack import ASR_RATE
from omnivox.voice.vad.turn import TurnParams

T = TypeVar("T")
# the most audio one trip to the input thread hears (a backlog is heard in pieces this long, so the
# loop acts on what it heard, and ``caught_up`` sees progress, at least this often)
TRIP_MS = 500


@dataclass(frozen=True)
class Feed:
    audio: np.ndarray  # float32 at 16 kHz
    arrival: float  # monotonic time the chunk arrived


@dataclass(frozen=True)
class Commit:
    tag: str | None  # the adapter's name for the request (realtime: the client's event id)


@dataclass(frozen=True)
class Clear:
    tag: str | None = None


@dataclass(frozen=True)
class Configure:
    params: TurnParams | None
    witness: bool = True  # the listener computes the backchannel witness (the judge weighs it)


@dataclass(frozen=True)
class Echo:
    kind: EchoKind
    gate_factor: float


@dataclass(frozen=True)
class Denoise:
    kind: NoiseReduction | None = None  # None: no suppressor


Job = Feed | Commit | Clear | Configure | Echo | Denoise


@dataclass(frozen=True)
class ChunkHeard:
    """One chunk heard: what the listener heard in it, and where it stood just after it."""

    feed: Feed
    heard: list[Heard]
    pause_started_ms: float | None  # the listener's pause after the chunk (``Listener.pause_started_ms``)
    audio_ms: float  # the stream time after the chunk


@dataclass
class Trip:
    """What one trip to the input thread heard: ``chunks`` in order, then (if one failed) the
    listener's error for the chunk after them; chunks it did not reach were put back in the queue."""

    chunks: list[ChunkHeard]
    error: OmnivoxError | None = None


class Hearing:
    def __init__(self, listener: Listener, executor: SerialThread, playout: Playout | None = None) -> None:
        self.listener = listener
        self.executor = executor
        self.playout = playout  # what the assistant played, for the echo guard
        self.echo_guard = False  # a canceller hears the input (``set_echo``)
        self.jobs: deque[Job] = deque()  # submitted, not taken yet (event loop only)
        self._submitted = asyncio.Event()  # a job came while the queue was empty
        self.queued_samples = 0  # audio submitted and not yet heard and acted on (``done``)
        self.busy_s = 0.0  # hearing work since the last take, and the audio it covered
        self.audio_s = 0.0
        self._background_s = listener.background_s  # the ASR's own threads, counted at a take
        self._trip_samples = TRIP_MS * ASR_RATE // 1000

    def submit(self, job: Job) -> None:
        if isinstance(job, Feed):
            self.queued_samples += len(job.audio)
        self.jobs.append(job)
        self._submitted.set()

    async def next_job(self) -> Job:
        """The next job in order (a ``Feed`` stays counted in the backlog until it is ``done``)."""
        while not self.jobs:
            self._submitted.clear()
            await self._submitted.wait()
        return self.jobs.popleft()

    def take_feeds(self, first: Feed) -> list[Feed]:
        """``first`` and the chunks queued right behind it (up to ``TRIP_MS`` of audio in all): the
        ones one trip to the input thread hears. Stops at the first job that is not audio."""
        feeds, samples = [first], len(first.audio)
        while self.jobs and isinstance(head := self.jobs[0], Feed):
            if samples + len(head.audio) > self._trip_samples:
                break
            feeds.append(head)
            samples += len(head.audio)
            self.jobs.popleft()
        return feeds

    def done(self, feed: Feed) -> None:
        """``feed`` has been heard and acted on: it is no longer waiting (``backlog_ms``)."""
        self.queued_samples -= len(feed.audio)

    @property
    def backlog_ms(self) -> float:
        """The user's audio that has arrived and is still waiting to be heard (more than a chunk or
        two only when it came faster than real time: held while the session waited for a worker)."""
        return self.queued_samples * 1000 / ASR_RATE

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a listener call in the input thread (``SerialThread.call``: one per chunk heard, so
        the cheapest hand-off there is, not ``run_in_executor``)."""
        return await self.executor.call(fn, *args)

    def set_echo(self, job: Echo) -> None:
        """Hear through a fresh canceller of this kind (in the input thread, between chunks)."""
        self.listener.echo = build_canceller(job.kind, job.gate_factor)
        self.echo_guard = self.listener.echo is not None and self.playout is not None

    def set_noise(self, job: Denoise) -> None:
        """Hear through a fresh noise suppressor of this kind (in the input thread, between chunks)."""
        self.listener.noise = build_suppressor(job.kind)

    async def feed(self, feeds: list[Feed]) -> Trip:
        """Hear ``feeds`` in order in one trip to the input thread, up to and including the first
        chunk the listener heard something in or failed on; the chunks after it go back to the head
        of the queue, to be heard next. The caller marks each chunk reached ``done``."""
        began = time.monotonic()
        references: list[np.ndarray | None] = [None] * len(feeds)
        if self.echo_guard and self.playout is not None:
            references = [self.playout.echo(f.arrival, len(f.audio)) for f in feeds]
        trip = await self.run(self._hear, feeds, references)
        reached = len(trip.chunks) + (trip.error is not None)
        self.jobs.extendleft(reversed(feeds[reached:]))
        self.busy_s += time.monotonic() - began
        self.audio_s += sum(len(c.feed.audio) for c in trip.chunks) / ASR_RATE
        return trip

    def _hear(self, feeds: list[Feed], references: list[np.ndarray | None]) -> Trip:
        """(The input thread.)"""
        listener = self.listener
        chunks: list[ChunkHeard] = []
        for feed, reference in zip(feeds, references, strict=True):
            try:
                heard = listener.feed(feed.audio, reference)
            except OmnivoxError as err:
                return Trip(chunks, err)
            chunks.append(ChunkHeard(feed, heard, listener.pause_started_ms, listener.audio_ms))
            if heard:
                break
        return Trip(chunks)

    def take_figures(self) -> tuple[float, float]:
        """(busy seconds, audio seconds) since the last take."""
        background = self.listener.background_s
        self.busy_s += background - self._background_s
        self._background_s = background
        figures = (self.busy_s, self.audio_s)
        self.busy_s = self.audio_s = 0.0
        return figures
