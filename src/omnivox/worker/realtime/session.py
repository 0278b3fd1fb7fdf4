"""One realtime session on a worker: the OpenAI Realtime protocol over the worker's voice stack.

Structured concurrency: one task group holds the receive loop (client events), the emit task (the
outbox) and the hearing loop (audio through the listener in the input thread); named work units
(``response``, ``idle``) are replaceable and owned here. When the socket goes, everything the session
started is cancelled, its threads finish their current step, and nothing outlives it.

Threads: the listener (VAD + ASR) runs in an input thread and responses (LLM + TTS) in an output
thread, so hearing a barge-in never waits for speech synthesis, and the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from omnivox.audio.clips import decode_clip_at
from omnivox.core.config import Settings
from omnivox.core.errors import (
    InputAudioBufferCommitEmpty,
    InvalidMessage,
    OmnivoxError,
    as_omnivox_error,
)
from omnivox.protocol import realtime as rt
from omnivox.protocol.realtime_session import SessionConfig, TurnDetection, apply_update
from omnivox.protocol.wire import frames, parse
from omnivox.voice.stack import ASR_RATE, VoiceStack
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.listener import Listener
from omnivox.worker.realtime.outbox import Outbox
from omnivox.worker.realtime.responder import Responder
from omnivox.worker.realtime.responses import Responses
from omnivox.worker.realtime.turns import TurnTaking
from omnivox.worker.realtime.units import WorkUnits

log = logging.getLogger(__name__)

MIN_COMMIT_MS = 100  # less audio than this cannot be a turn (OpenAI's rule too)


class _Closed(Exception):
    """The session is over (client gone, or a fatal error was reported)."""


def turn_params(vad: TurnDetection | None) -> TurnParams | None:
    if vad is None:
        return None
    return TurnParams(
        threshold=vad.threshold,
        prefix_padding_ms=vad.prefix_padding_ms,
        silence_duration_ms=vad.silence_duration_ms,
    )


class RealtimeSession:
    def __init__(self, ws: WebSocket, stack: VoiceStack, settings: Settings, beta: bool = False) -> None:
        self.ws = ws
        self.stack = stack
        self.settings = settings
        self.lead_ms = float(settings.audio_lead_ms)
        self.config = SessionConfig(instructions=stack.system_prompt)
        self.config.audio.output.voice = stack.tts.default_voice
        self.conversation = Conversation()
        self.outbox = Outbox(ws.send_text, beta=beta)
        self.units = WorkUnits(self._unit_failed)
        self.input_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-input")
        self.output_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-output")
        self.decoder = InputDecoder(self.config.audio.input.format, ASR_RATE)
        self.encoder = OutputEncoder(self.config.audio.output.format)
        self.listener = Listener(
            stack.vad,
            stack.asr,
            turn_params(self.config.audio.input.turn_detection),
            settings.barge_in_min_ms,
        )
        self.responses = Responses(self)
        self.turns = TurnTaking(self)
        self.last_response: Responder | None = None
        self._hearing: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._ended = asyncio.Event()
        self._fatal: OmnivoxError | None = None
        self.asr_busy_s = 0.0  # hearing work since the last metrics report, and the audio it covered
        self.asr_audio_s = 0.0

    # ---- life

    async def run(self) -> None:
        self.outbox.put(rt.SessionCreated(session=self.config.wire()))
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.outbox.run(), name="emit")
                tg.create_task(self._hear_loop(), name="hear")
                tg.create_task(self._receive(), name="receive")
                tg.create_task(self._supervise(), name="supervisor")
        except* _Closed:
            pass
        finally:
            await self.units.close()
            # the threads finish their current step before the worker resets the models
            await asyncio.to_thread(self.input_thread.shutdown, True, cancel_futures=True)
            await asyncio.to_thread(self.output_thread.shutdown, True, cancel_futures=True)
        if self._fatal is not None:
            with contextlib.suppress(Exception):
                await self.ws.close(self._fatal.close_code)

    async def _supervise(self) -> None:
        await self._ended.wait()
        if self._fatal is not None:
            self.outbox.put(rt.error_event(self._fatal))
            await self.outbox.drain(2.0)
        raise _Closed()

    def _unit_failed(self, name: str, exc: BaseException) -> None:
        log.error("realtime unit %s failed", name, exc_info=exc)
        self.fail(as_omnivox_error(exc))

    def fail(self, err: OmnivoxError) -> None:
        """End the session after telling the client why (a server fault)."""
        self._fatal = err
        self._ended.set()

    def report(self, err: OmnivoxError, client_event_id: str | None = None) -> None:
        """A recoverable error: the client hears of it and the session goes on."""
        self.outbox.put(rt.error_event(err, client_event_id))
        self.outbox.put(rt.InternalMetrics(error_code=err.wire_code))

    # ---- client events

    async def _receive(self) -> None:
        try:
            async for raw in frames(self.ws):
                await self._on_frame(raw, time.monotonic())
        except WebSocketDisconnect:
            pass
        finally:
            self._ended.set()

    async def _on_frame(self, raw: str | bytes, arrival: float) -> None:
        try:
            event = parse(
                rt.CLIENT_ADAPTER,
                raw,
                max_bytes=self.settings.max_message_bytes,
                tags=rt.CLIENT_TYPES,
                aliases=rt.BETA_CLIENT_TYPES,
            )
        except OmnivoxError as err:
            self.report(err, err.details.get("event_id"))
            return
        try:
            await self._dispatch(event, arrival)
        except OmnivoxError as err:
            self.report(err, event.event_id)

    async def _dispatch(self, event: Any, arrival: float) -> None:
        if isinstance(event, rt.InputAudioBufferAppend):
            self._hearing.put_nowait(("feed", self.decoder.decode(event.audio), arrival))
        elif isinstance(event, rt.SessionUpdate):
            self._update_session(event.session)
        elif isinstance(event, rt.InputAudioBufferCommit | rt.InputAudioBufferClear):
            self._hearing.put_nowait((event.type, event.event_id))
        elif isinstance(event, rt.ResponseCreate):
            await self.responses.create(event.response)
        elif isinstance(event, rt.ResponseCancel):
            self.responses.cancel(event.response_id)
        elif isinstance(event, rt.OutputAudioBufferClear):
            if self.responses.active is not None:
                response_id = self.responses.active.response_id
                self.responses.active.cancel("client_cancelled")
                self.outbox.put(rt.OutputAudioCleared(response_id=response_id))
        elif isinstance(event, rt.ConversationItemCreate):
            await self._create_item(event)
        elif isinstance(event, rt.ConversationItemRetrieve):
            self.outbox.put(rt.ItemRetrieved(item=self.conversation.get(event.item_id).wire()))
        elif isinstance(event, rt.ConversationItemTruncate):
            self._truncate(event)
        elif isinstance(event, rt.ConversationItemDelete):
            self.conversation.delete(event.item_id)
            self.outbox.put(rt.ItemDeleted(item_id=event.item_id))

    def _update_session(self, patch: dict[str, Any]) -> None:
        new = apply_update(self.config, patch)
        new.audio.output.voice = self.stack.tts.resolve_voice(new.audio.output.voice)
        old, self.config = self.config, new
        if new.audio.input.format != old.audio.input.format:
            self.decoder = InputDecoder(new.audio.input.format, ASR_RATE)
        if new.audio.output.format != old.audio.output.format:
            self.encoder = OutputEncoder(new.audio.output.format)
        if new.audio.input.turn_detection != old.audio.input.turn_detection:
            self._hearing.put_nowait(("configure", turn_params(new.audio.input.turn_detection)))
        self.outbox.put(rt.SessionUpdated(session=new.wire()))

    async def _create_item(self, event: rt.ConversationItemCreate) -> None:
        spec = event.item
        spoken = any(c.type in ("input_audio", "output_audio", "audio") for c in spec.content)
        item = Item(role=spec.role, audio=spoken, text=self.item_text(spec), id=spec.id or "")
        if spec.role == "user" and any(
            c.type == "input_audio" and c.audio and c.transcript is None for c in spec.content
        ):
            item.text = await self._transcribe_item(spec)
        previous = self.conversation.add(item, event.previous_item_id)
        self.outbox.put(rt.ItemAdded(previous_item_id=previous, item=item.wire()))
        if spoken and spec.role == "user" and self.config.audio.input.transcription is not None:
            self.outbox.put(rt.TranscriptionCompleted(item_id=item.id, transcript=item.text))
        self.outbox.put(rt.ItemDone(previous_item_id=previous, item=item.wire()))

    def item_text(self, spec: rt.ItemIn) -> str:
        """The text of a client-made item: its text parts and any transcripts it carries."""
        texts = [c.text or c.transcript or "" for c in spec.content if c.type != "input_image"]
        return " ".join(t.strip() for t in texts if t and t.strip())

    async def _transcribe_item(self, spec: rt.ItemIn) -> str:
        fmt = self.config.audio.input.format
        if fmt.type != "audio/pcm":
            raise InvalidMessage("audio items must be audio/pcm", param="item.content")
        texts = [c.text or "" for c in spec.content if c.type == "input_text"]
        for part in spec.content:
            if part.type == "input_audio" and part.audio:
                audio = decode_clip_at(part.audio, "pcm16", fmt.rate, ASR_RATE)
                loop = asyncio.get_running_loop()
                try:
                    texts.append(
                        await loop.run_in_executor(self.input_thread, self.listener.transcribe_clip, audio)
                    )
                except RuntimeError:
                    raise InvalidMessage(
                        "cannot transcribe an audio item while the user is speaking", param="item.content"
                    ) from None
        return " ".join(t for t in texts if t)

    def _truncate(self, event: rt.ConversationItemTruncate) -> None:
        item = self.conversation.get(event.item_id)
        if item.role != "assistant" or not item.audio:
            raise InvalidMessage("only assistant audio items can be truncated", param="item_id")
        if event.audio_end_ms > item.audio_ms + 1:
            raise InvalidMessage(
                f"audio_end_ms {event.audio_end_ms} is past the item's {int(item.audio_ms)} ms of audio",
                param="audio_end_ms",
            )
        active = self.responses.active
        if active is not None and active.plan.item is item:
            active.cancel("client_cancelled")
        item.truncate(event.audio_end_ms)
        self.outbox.put(rt.ItemTruncated(item_id=item.id, audio_end_ms=event.audio_end_ms))

    # ---- hearing

    async def _hear_loop(self) -> None:
        """Audio-ordered jobs (appends, commits, clears, settings) through the input thread, in order."""
        loop = asyncio.get_running_loop()
        while True:
            job = await self._hearing.get()
            kind = job[0]
            if kind == "feed":
                began = time.monotonic()
                heard = await loop.run_in_executor(self.input_thread, self.listener.feed, job[1])
                self.asr_busy_s += time.monotonic() - began
                self.asr_audio_s += len(job[1]) / ASR_RATE
                for h in heard:
                    await self.turns.on_heard(h, job[2])
            elif kind == "input_audio_buffer.commit":
                await self._commit(job[1])
            elif kind == "input_audio_buffer.clear":
                await loop.run_in_executor(self.input_thread, self.listener.clear)
                self.outbox.put(rt.Cleared())
            elif kind == "configure":
                await loop.run_in_executor(self.input_thread, self.listener.configure, job[1])

    async def _commit(self, client_event_id: str | None) -> None:
        pending_ms = self.listener.pending_samples * 1000 / ASR_RATE
        if pending_ms < MIN_COMMIT_MS:
            self.report(
                InputAudioBufferCommitEmpty(
                    f"the input buffer holds {pending_ms:.0f} ms of audio; {MIN_COMMIT_MS} ms are needed"
                ),
                client_event_id,
            )
            return
        heard = await asyncio.get_running_loop().run_in_executor(self.input_thread, self.listener.commit)
        self.turns.commit(heard.text, keep_empty=True)

    # ---- what the turn-taking needs to know

    def listener_ms(self) -> float:
        return self.listener.audio_ms

    def playback_until(self) -> float:
        """Seconds of the last finished response's audio the client has yet to play."""
        last = self.last_response
        if last is None or self.responses.active is not None:
            return 0.0
        return max(0.0, (last.plan.item.audio_ms - last.played_ms()) / 1000)

    def cut_playback(self) -> None:
        """Barge-in after a response finished but while its audio still plays: keep what was heard."""
        last = self.last_response
        if last is None or not last.plan.audio:
            return
        heard = last.played_ms()
        last.plan.item.truncate(heard)
        self.outbox.put(rt.ItemTruncated(item_id=last.plan.item.id, audio_end_ms=int(heard)))
        self.last_response = None
