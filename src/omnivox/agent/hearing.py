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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from omnivox.agent.playout import Playout
from omnivox.core.config import EchoKind
from omnivox.voice.echo.choice import build_canceller
from omnivox.voice.listener import Heard, Listener
from omnivox.voice.noise.suppressor import NoiseReduction, build_suppressor
from omnivox.voice.stack import ASR_RATE
from omnivox.voice.vad.turn import TurnParams

T = TypeVar("T")


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


@dataclass(frozen=True)
class Echo:
    kind: EchoKind
    gate_factor: float


@dataclass(frozen=True)
class Denoise:
    kind: NoiseReduction | None = None  # None: no suppressor


Job = Feed | Commit | Clear | Configure | Echo | Denoise


class Hearing:
    def __init__(self, listener: Listener, executor: Executor, playout: Playout | None = None) -> None:
        self.listener = listener
        self.executor = executor
        self.playout = playout  # what the assistant played, for the echo guard
        self.echo_guard = False  # a canceller hears the input (``set_echo``)
        self.jobs: asyncio.Queue[Job] = asyncio.Queue()
        self.queued_samples = 0  # audio submitted and not yet taken to be heard
        self.busy_s = 0.0  # hearing work since the last take, and the audio it covered
        self.audio_s = 0.0
        self._background_s = listener.background_s  # the ASR's own threads, counted at a take

    def submit(self, job: Job) -> None:
        if isinstance(job, Feed):
            self.queued_samples += len(job.audio)
        self.jobs.put_nowait(job)

    async def next_job(self) -> Job:
        job = await self.jobs.get()
        if isinstance(job, Feed):
            self.queued_samples -= len(job.audio)
        return job

    @property
    def backlog_ms(self) -> float:
        """The user's audio that has arrived and is still waiting to be heard (more than a chunk or
        two only when it came faster than real time: held while the session waited for a worker)."""
        return self.queued_samples * 1000 / ASR_RATE

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a listener call in the input thread."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def set_echo(self, job: Echo) -> None:
        """Hear through a fresh canceller of this kind (in the input thread, between chunks)."""
        self.listener.echo = build_canceller(job.kind, job.gate_factor)
        self.echo_guard = self.listener.echo is not None and self.playout is not None

    def set_noise(self, job: Denoise) -> None:
        """Hear through a fresh noise suppressor of this kind (in the input thread, between chunks)."""
        self.listener.noise = build_suppressor(job.kind)

    async def feed(self, job: Feed) -> list[Heard]:
        began = time.monotonic()
        reference = None
        if self.echo_guard and self.playout is not None:
            reference = self.playout.echo(job.arrival, len(job.audio))
        heard = await self.run(self.listener.feed, job.audio, reference)
        self.busy_s += time.monotonic() - began
        self.audio_s += len(job.audio) / ASR_RATE
        return heard

    def take_figures(self) -> tuple[float, float]:
        """(busy seconds, audio seconds) since the last take."""
        background = self.listener.background_s
        self.busy_s += background - self._background_s
        self._background_s = background
        figures = (self.busy_s, self.audio_s)
        self.busy_s = self.audio_s = 0.0
        return figures
