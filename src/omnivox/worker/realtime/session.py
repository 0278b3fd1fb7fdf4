"""One realtime session on a worker: the OpenAI Realtime protocol over the engine's voice methods.

The session is a protocol handler on the session runtime (``session.runtime``): client events arrive
through ``on_frame``, its events leave through the connection's outbox, work units are the
connection's. Its parts own their state: ``Conversation`` (items and their events), ``TurnTaking``
(what was heard -> typed actions), ``Responses`` (each response an explicit state machine),
``Hearing`` (audio-ordered jobs). This module wires them: it dispatches client events, runs the
hearing loop (``main``), and carries out turn-taking's actions.

Threads: hearing (VAD + ASR) runs in an input thread and responses (LLM + TTS) in an output thread,
so hearing a barge-in never waits for speech synthesis, and the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.audio.clips import decode_clip_at
from omnivox.core.errors import InputAudioBufferCommitEmpty, InvalidMessage, OmnivoxError
from omnivox.protocol import realtime as rt
from omnivox.protocol import realtime_events as ev
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.internal import Metrics
from omnivox.protocol.realtime_session import SessionConfig, TurnDetection, apply_update
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.handler import SessionHandler
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item, item_id, item_text
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.hearing import ASR_RATE, Clear, Commit, Configure, Feed, Hearing
from omnivox.worker.realtime.response import Response, ResponseState
from omnivox.worker.realtime.responses import Responses
from omnivox.worker.realtime.turns import (
    Action,
    BargeIn,
    CommitTurn,
    DropPrepared,
    Emit,
    Floor,
    Prepare,
    StopIdle,
    TurnTaking,
)

MIN_COMMIT_MS = 100  # less audio than this cannot be a turn (OpenAI's rule too)
SILENCE_MARKER = "..."  # what the user "said" when the idle timeout prompts them


def turn_params(vad: TurnDetection | None) -> TurnParams | None:
    if vad is None:
        return None
    return TurnParams(
        threshold=vad.threshold,
        prefix_padding_ms=vad.prefix_padding_ms,
        silence_duration_ms=vad.silence_duration_ms,
        # semantic_vad: an end-of-turn model sets each pause's length (silence_duration_ms is unused)
        eagerness=(vad.eagerness or "auto") if vad.type == "semantic_vad" else None,
    )


class RealtimeSession(SessionHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        engine = self.host.engine
        self.profile = engine.voice_profile()
        self.config = SessionConfig(instructions=self.profile.system_prompt)
        self.config.audio.output.voice = self.profile.default_voice
        self.events = Events(self.conn, beta=self.info.query.get("beta") in ("1", "true"))
        self.conversation = Conversation(self.events.put)
        self.input_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-input")
        self.output_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-output")
        self.decoder = InputDecoder(self.config.audio.input.format, ASR_RATE)
        self.encoder = OutputEncoder(self.config.audio.output.format)
        vad = self.config.audio.input.turn_detection
        listener = engine.open_listener(turn_params(vad), self.settings.barge_in_min_ms)
        self.hearing = Hearing(listener, self.input_thread)
        self.turns = TurnTaking(vad, transcribe=self.config.audio.input.transcription is not None)
        self.conversation.transcribing = self.turns.transcribe
        self.responses = Responses(
            engine=engine,
            profile=self.profile,
            events=self.events,
            conversation=self.conversation,
            units=self.conn.units,
            executor=self.output_thread,
            lead_ms=float(self.settings.audio_lead_ms),
            config=lambda: self.config,
            encoder=lambda: self.encoder,
            on_finished=self._finished,
        )
        self.events.put(ev.SessionCreated(session=self.config.wire()))

    async def close(self) -> None:
        # the threads finish their current step before the worker resets the models
        await asyncio.to_thread(self.input_thread.shutdown, True, cancel_futures=True)
        await asyncio.to_thread(self.output_thread.shutdown, True, cancel_futures=True)

    # ---- client events

    async def on_frame(self, raw: str | bytes) -> None:
        arrival = time.monotonic()
        event = rt.REALTIME.parser(raw, self.settings.max_message_bytes)
        try:
            await self._dispatch(event, arrival)
        except OmnivoxError as err:
            if event.event_id:
                err.details.setdefault("event_id", event.event_id)
            raise

    async def _dispatch(self, event: Any, arrival: float) -> None:
        if isinstance(event, rt.InputAudioBufferAppend):
            self.hearing.submit(Feed(self.decoder.decode(event.audio), arrival))
        elif isinstance(event, rt.SessionUpdate):
            self._update_session(event.session)
        elif isinstance(event, rt.InputAudioBufferCommit):
            self.hearing.submit(Commit(event.event_id))
        elif isinstance(event, rt.InputAudioBufferClear):
            self.hearing.submit(Clear(event.event_id))
        elif isinstance(event, rt.ResponseCreate):
            await self._respond(event.response)
        elif isinstance(event, rt.ResponseCancel):
            self.responses.cancel(event.response_id)
        elif isinstance(event, rt.OutputAudioBufferClear):
            active = self.responses.active
            if active is not None:
                active.cancel("client_cancelled")
                self.events.put(ev.OutputAudioCleared(response_id=active.response_id))
        elif isinstance(event, rt.ConversationItemCreate):
            await self._create_item(event)
        elif isinstance(event, rt.ConversationItemRetrieve):
            self.conversation.retrieve(event.item_id)
        elif isinstance(event, rt.ConversationItemTruncate):
            item = self.conversation.check_truncation(event.item_id, event.audio_end_ms)
            active = self.responses.active
            if active is not None and active.plan.item is item:
                active.cancel("client_cancelled")
            self.conversation.truncate(item, event.audio_end_ms)
        elif isinstance(event, rt.ConversationItemDelete):
            self.conversation.delete(event.item_id)

    def _update_session(self, patch: dict[str, Any]) -> None:
        new = apply_update(self.config, patch)
        new.audio.output.voice = self.profile.resolve_voice(new.audio.output.voice)
        old, self.config = self.config, new
        if new.audio.input.format != old.audio.input.format:
            self.decoder = InputDecoder(new.audio.input.format, ASR_RATE)
        if new.audio.output.format != old.audio.output.format:
            self.encoder = OutputEncoder(new.audio.output.format)
        vad = new.audio.input.turn_detection
        self.turns.vad = vad
        self.turns.transcribe = self.conversation.transcribing = new.audio.input.transcription is not None
        if vad != old.audio.input.turn_detection:
            self.hearing.submit(Configure(turn_params(vad)))
        self.events.put(ev.SessionUpdated(session=new.wire()))

    async def _create_item(self, event: rt.ConversationItemCreate) -> None:
        spec = event.item
        spoken = any(c.type in ("input_audio", "output_audio", "audio") for c in spec.content)
        item = Item(role=spec.role, audio=spoken, text=item_text(spec), id=spec.id or "")
        if spec.role == "user" and any(
            c.type == "input_audio" and c.audio and c.transcript is None for c in spec.content
        ):
            item.text = await self._transcribe_item(spec)
        self.conversation.create(item, event.previous_item_id)

    async def _transcribe_item(self, spec: rt.ItemIn) -> str:
        fmt = self.config.audio.input.format
        if fmt.type != "audio/pcm":
            raise InvalidMessage("audio items must be audio/pcm", param="item.content")
        texts = [c.text or "" for c in spec.content if c.type == "input_text"]
        for part in spec.content:
            if part.type == "input_audio" and part.audio:
                audio = decode_clip_at(part.audio, "pcm16", fmt.rate, ASR_RATE)
                try:
                    texts.append(await self.hearing.run(self.hearing.listener.transcribe_clip, audio))
                except RuntimeError:
                    raise InvalidMessage(
                        "cannot transcribe an audio item while the user is speaking", param="item.content"
                    ) from None
        return " ".join(t for t in texts if t)

    # ---- hearing

    async def main(self) -> None:
        """Audio-ordered jobs (appends, commits, clears, settings) through the input thread, in order."""
        hearing = self.hearing
        while True:
            job = await hearing.jobs.get()
            if isinstance(job, Feed):
                try:
                    heard_now = await hearing.feed(job)
                except OmnivoxError as err:
                    if err.fatal:
                        raise
                    self.conn.error(err, keep_open=True)  # e.g. stage_lost: the next turn is heard again
                    continue
                for heard in heard_now:
                    await self.execute(self.turns.heard(heard, job.arrival, self._floor()))
            elif isinstance(job, Commit):
                await self._commit(job.event_id)
            elif isinstance(job, Clear):
                await hearing.run(hearing.listener.clear)
                self.events.put(ev.Cleared())
            else:
                await hearing.run(hearing.listener.configure, job.params)

    async def _commit(self, client_event_id: str | None) -> None:
        pending_ms = self.hearing.listener.pending_samples * 1000 / ASR_RATE
        if pending_ms < MIN_COMMIT_MS:
            err = InputAudioBufferCommitEmpty(
                f"the input buffer holds {pending_ms:.0f} ms of audio; {MIN_COMMIT_MS} ms are needed"
            )
            self.conn.error(err, client_event_id)
            return
        heard = await self.hearing.run(self.hearing.listener.commit)
        await self.execute(self.turns.commit(heard.text, keep_empty=True))

    def _floor(self) -> Floor:
        return Floor(speaking=self.responses.speaking(), responding=self.responses.active is not None)

    async def execute(self, actions: list[Action]) -> None:
        """Carry out what turn-taking decided, in order."""
        for action in actions:
            if isinstance(action, Emit):
                self.events.put(action.event)
            elif isinstance(action, StopIdle):
                await self.conn.units.cancel("idle")
            elif isinstance(action, BargeIn):
                self.responses.interrupt(action.reason)
            elif isinstance(action, Prepare):
                await self.responses.speculate(action.text)
            elif isinstance(action, DropPrepared):
                await self.responses.discard_speculation()
            elif isinstance(action, CommitTurn):
                item = self.conversation.commit_user_turn(action.item_id, action.text)
                if action.respond:
                    await self.conn.units.cancel("idle")
                    if not await self.responses.confirm(item, action.speech_end_at):
                        await self.responses.create(None, speech_end_at=action.speech_end_at)

    async def _respond(
        self, params: rt.ResponseParams | None, extra: list[ChatMessage] | None = None
    ) -> None:
        await self.conn.units.cancel("idle")
        await self.responses.create(params, extra=extra)

    # ---- after a response

    async def _finished(self, response: Response) -> None:
        figures = response.figures
        if figures.error is not None:
            self.conn.error(figures.error, keep_open=True)
        asr_busy, asr_audio = self.hearing.take_figures()
        self.internal(
            Metrics(
                voice_to_voice_s=figures.voice_to_voice_s,
                llm_ttft_s=figures.llm_ttft_s,
                tts_ttfa_s=figures.tts_ttfa_s,
                interrupted=response.state is ResponseState.CANCELLED,
                response_done=True,
                asr_busy_s=asr_busy,
                asr_audio_s=asr_audio,
                tts_busy_s=figures.tts_busy_s,
                tts_audio_s=figures.tts_audio_s,
            )
        )
        await self._arm_idle(self.responses.playback_left_s())

    async def _arm_idle(self, playback_left_s: float) -> None:
        """(Re)start the idle timer: it runs from when the reply's audio has finished playing."""
        vad = self.config.audio.input.turn_detection
        if vad is None or vad.idle_timeout_ms is None:
            return
        await self.conn.units.start("idle", self._idle(playback_left_s + vad.idle_timeout_ms / 1000))

    async def _idle(self, delay_s: float) -> None:
        listener = self.hearing.listener
        start_ms = listener.audio_ms
        await asyncio.sleep(delay_s)
        if self.responses.active or self.turns.in_turn:
            return
        self.events.put(
            ev.TimeoutTriggered(
                audio_start_ms=int(start_ms), audio_end_ms=int(listener.audio_ms), item_id=item_id()
            )
        )
        await self._respond(None, extra=[ChatMessage(role="user", content=SILENCE_MARKER)])
