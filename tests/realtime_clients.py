"""Third-party realtime clients, unchanged, driven against omnivox as an application would use them.

- pipecat's ``OpenAIRealtimeLLMService`` in a pipeline between a microphone processor that pushes
  synthesized speech as ``InputAudioRawFrame``s and a loudspeaker processor that takes the service's
  output (no audio device, no transport);
- LiveKit Agents' ``RealtimeModel`` session, used directly (``push_audio``, ``generate_reply``,
  ``interrupt``/``truncate``, its events), with no room and no LiveKit server: a barge-in does what
  LiveKit's ``AgentActivity`` does when the server hears the user over a reply;
- the OpenAI Agents SDK's ``RealtimeRunner`` session (which sends its own truncate on a barge-in).

Each plays reply audio on a :class:`Loudspeaker` that plays in real time from the first sample it
gets, so "what was heard" is what a device would have played. :func:`client_logs` collects the
ERROR lines the client libraries log (loguru for pipecat, ``logging`` for the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omnivox.audio.pcm import to_pcm16
from wiretap import wait_until

RATE = 24000
CLIENT_LOGGERS = ("livekit", "openai.agents", "openai", "pipecat")


class Loudspeaker:
    """Plays reply audio in real time from its first sample: heard = min(received, elapsed)."""

    def __init__(self) -> None:
        self.received_ms = 0.0
        self.total_ms = 0.0  # everything ever received, across replies
        self._started: float | None = None

    def play(self, pcm16: bytes) -> None:
        if self._started is None:
            self._started = time.monotonic()
        ms = len(pcm16) / 2 * 1000 / RATE
        self.received_ms += ms
        self.total_ms += ms

    @property
    def playing(self) -> bool:
        return self._started is not None and self.heard_ms() < self.received_ms

    def heard_ms(self) -> int:
        if self._started is None:
            return 0
        return int(min(self.received_ms, (time.monotonic() - self._started) * 1000))

    def stop(self) -> int:
        """Stop playing (a barge-in or the reply's end): how much of the reply was heard."""
        heard = self.heard_ms()
        self.received_ms, self._started = 0.0, None
        return heard


def chunks(audio: np.ndarray, chunk_ms: int) -> Iterator[bytes]:
    step = RATE * chunk_ms // 1000
    for i in range(0, len(audio), step):
        yield to_pcm16(audio[i : i + step])


async def paced(audio: np.ndarray, send: Any, chunk_ms: int = 20, speed: float = 1.0) -> None:
    """``await send(pcm16)`` for each ``chunk_ms`` piece, ``speed`` times real time (0: unpaced)."""
    start = time.monotonic()
    for n, piece in enumerate(chunks(audio, chunk_ms)):
        result = send(piece)
        if asyncio.iscoroutine(result):
            await result
        if speed:
            await asyncio.sleep(max(0.0, start + (n + 1) * chunk_ms / 1000 / speed - time.monotonic()))


@dataclass
class ClientLogs:
    """ERROR (and worse) lines the client libraries logged."""

    errors: list[str] = field(default_factory=list)


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(f"{record.name}: {record.getMessage()}")


@contextlib.contextmanager
def client_logs() -> Iterator[ClientLogs]:
    """Collect the ERROR lines of pipecat (loguru) and of LiveKit and the Agents SDK (logging)."""
    from loguru import logger as loguru_logger

    logs = ClientLogs()
    handler = _Collect(logs.errors)
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    for lg in loggers:
        lg.addHandler(handler)
    sink = loguru_logger.add(lambda m: logs.errors.append(f"loguru: {m.record['message']}"), level="ERROR")
    try:
        yield logs
    finally:
        loguru_logger.remove(sink)
        for lg in loggers:
            lg.removeHandler(handler)


# ---- pipecat


class PipecatCall:
    """pipecat 1.14's ``OpenAIRealtimeLLMService`` with its default settings, in a running pipeline:
    ``[microphone, service, loudspeaker]``. ``errors`` are the ErrorFrames the service pushed."""

    def __init__(self, ws_base: str, api_key: str = "secret") -> None:
        from pipecat.frames.frames import (
            BotStoppedSpeakingFrame,
            InputAudioRawFrame,
            TTSAudioRawFrame,
            TTSStoppedFrame,
        )
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineParams, PipelineWorker
        from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
        from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

        call = self
        self.speaker = Loudspeaker()
        self.errors: list[Any] = []
        self.frames: list[tuple[float, Any]] = []  # what reached the loudspeaker, with arrival times

        class Microphone(FrameProcessor):
            """Pushes speech into the pipeline as an input transport would."""

            async def process_frame(self, frame: Any, direction: Any) -> None:
                await super().process_frame(frame, direction)
                await self.push_frame(frame, direction)

            async def speak(self, pcm16: bytes) -> None:
                await self.push_frame(InputAudioRawFrame(audio=pcm16, sample_rate=RATE, num_channels=1))

        class Speaker(FrameProcessor):
            """Plays the service's audio; when a reply's audio ends, says so upstream (as pipecat's
            output transports do with ``BotStoppedSpeakingFrame``)."""

            async def process_frame(self, frame: Any, direction: Any) -> None:
                await super().process_frame(frame, direction)
                call.frames.append((time.monotonic(), frame))
                if isinstance(frame, TTSAudioRawFrame):
                    call.speaker.play(frame.audio)
                elif isinstance(frame, TTSStoppedFrame):
                    call.speaker.stop()
                    await self.push_frame(BotStoppedSpeakingFrame(), FrameDirection.UPSTREAM)
                await self.push_frame(frame, direction)

        self.microphone = Microphone()
        self.llm = OpenAIRealtimeLLMService(api_key=api_key, base_url=f"{ws_base}/v1/realtime")

        @self.llm.event_handler("on_error")
        async def _on_error(_service: Any, error: Any) -> None:
            self.errors.append(error)

        self.worker = PipelineWorker(
            Pipeline([self.microphone, self.llm, Speaker()]),
            params=PipelineParams(audio_in_sample_rate=RATE, audio_out_sample_rate=RATE),
            idle_timeout_secs=None,
            enable_rtvi=False,
        )
        self._run: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PipecatCall:
        from pipecat.workers.runner import WorkerRunner

        self.runner = WorkerRunner(handle_sigint=False)
        await self.runner.add_workers(self.worker)
        self._run = asyncio.create_task(self.runner.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cancel()
        assert self._run is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._run, 15)

    async def say(self, audio: np.ndarray, speed: float = 1.0) -> None:
        """Speak ``audio`` into the pipeline in 20 ms frames."""
        await paced(audio, self.microphone.speak, speed=speed)

    def audio_ms_after(self, at: float) -> float:
        """Milliseconds of reply audio that reached the loudspeaker after ``at``."""
        from pipecat.frames.frames import TTSAudioRawFrame

        return sum(
            len(f.audio) / 2 * 1000 / RATE
            for t, f in self.frames
            if t > at and isinstance(f, TTSAudioRawFrame)
        )


# ---- LiveKit Agents


@dataclass
class Generation:
    """One LiveKit generation (a response) as the application saw it."""

    response_id: str
    message_ids: list[str] = field(default_factory=list)
    audio_ms: float = 0.0
    text: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)


class LiveKitCall:
    """LiveKit Agents 1.8.9's ``RealtimeModel(base_url=...)`` session, with its default settings.

    Reply audio is played as it streams in; when the server hears the user over a reply, the call does
    what ``AgentActivity`` does on a realtime model's ``input_speech_started``: ``interrupt()`` (a
    ``response.cancel``) and ``truncate()`` of the playing message at what was played. ``errors``
    are the ``error`` events the session emitted (``RealtimeModelError``)."""

    def __init__(self, http_base: str, api_key: str = "secret") -> None:
        from livekit.plugins.openai.realtime import RealtimeModel

        self.model = RealtimeModel(base_url=f"{http_base}/v1", api_key=api_key)
        self.session: Any = None
        self.speaker = Loudspeaker()
        self.errors: list[Any] = []
        self.generations: list[Generation] = []
        self.truncations: list[tuple[str, int]] = []  # (message id, audio_end_ms) this call sent
        self._playing: tuple[str, Any] | None = None  # the message playing and its modalities
        self._tasks: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> LiveKitCall:
        self.session = self.model.session()
        self.session.on("error", self.errors.append)
        self.session.on("generation_created", lambda ev: self._spawn(self._play(ev)))
        self.session.on("input_speech_started", lambda _ev: self._spawn(self._barge_in()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.wait_for(self.session.aclose(), 10)
        await self.model.aclose()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def say(self, audio: np.ndarray, speed: float = 1.0) -> None:
        from livekit import rtc

        def push(pcm16: bytes) -> None:
            frame = rtc.AudioFrame(
                data=pcm16, sample_rate=RATE, num_channels=1, samples_per_channel=len(pcm16) // 2
            )
            self.session.push_audio(frame)

        await paced(audio, push, speed=speed)

    async def _play(self, ev: Any) -> None:
        generation = Generation(response_id=ev.response_id or "")
        self.generations.append(generation)
        try:
            async for message in ev.message_stream:
                generation.message_ids.append(message.message_id)
                self.speaker.stop()  # the message before it has played out by now
                self._playing = (message.message_id, message.modalities)
                text = asyncio.create_task(_join(message.text_stream))
                async for frame in message.audio_stream:
                    pcm16 = bytes(frame.data)
                    generation.audio_ms += len(pcm16) / 2 * 1000 / RATE
                    self.speaker.play(pcm16)
                generation.text += await text
        finally:
            generation.done.set()

    async def _barge_in(self) -> None:
        if self._playing is None or not self.speaker.playing:
            return
        message_id, modalities = self._playing
        self._playing = None
        heard = self.speaker.stop()
        self.session.interrupt()
        self.session.truncate(message_id=message_id, modalities=await modalities, audio_end_ms=heard)
        self.truncations.append((message_id, heard))


async def _join(stream: Any) -> str:
    return "".join([piece async for piece in stream])


# ---- the OpenAI Agents SDK


class AgentsCall:
    """The OpenAI Agents SDK's ``RealtimeRunner`` session with a plain ``RealtimeAgent`` and default
    settings; every session event is collected by a background reader."""

    def __init__(self, ws_base: str, api_key: str = "secret", instructions: str = "Be brief.") -> None:
        from agents.realtime import RealtimeAgent, RealtimeRunner

        self.ws_base = ws_base
        self.api_key = api_key
        self.runner = RealtimeRunner(
            starting_agent=RealtimeAgent(name="Assistant", instructions=instructions)
        )
        self.events: list[tuple[float, Any]] = []
        self.session: Any = None
        self.closed: BaseException | None = None
        self._new = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AgentsCall:
        self.session = await self.runner.run(
            model_config={"url": f"{self.ws_base}/v1/realtime", "api_key": self.api_key}
        )
        await self.session.__aenter__()
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._reader is not None
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await asyncio.wait_for(self.session.__aexit__(None, None, None), 10)

    async def _read(self) -> None:
        try:
            async for event in self.session:
                self.events.append((time.monotonic(), event))
                self._new.set()
        except Exception as exc:  # the session ended with an error: kept for the test to report
            self.closed = exc
            self._new.set()

    def of(self, kind: str) -> list[Any]:
        return [e for _, e in self.events if e.type == kind]

    def errors(self) -> list[Any]:
        """The session's ``error`` events (each a RealtimeError with the model's error)."""
        return self.of("error")

    async def say(self, audio: np.ndarray, speed: float = 1.0) -> None:
        await paced(audio, self.session.send_audio, speed=speed)

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 20.0) -> Any:
        await wait_until(lambda: len(self.of(kind)) >= count or self.closed is not None, self._new, timeout)
        found = self.of(kind)
        if len(found) < count:
            seen = [e.type for _, e in self.events]
            raise TimeoutError(
                f"the Agents SDK session had no {kind} (#{count}) in {timeout}s "
                f"(session ended: {self.closed!r}); its events: {seen}"
            )
        return found[count - 1]
