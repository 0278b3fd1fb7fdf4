"""One realtime session on a worker: the OpenAI Realtime protocol over the engine's voice methods.

The session is a protocol handler on the connection runtime (``connection.runtime``): client events arrive
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
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from omnivox.agent.events import (
    HearingEvent,
    InputCleared,
    ReplyState,
    SpeechStarted,
    SpeechStopped,
    TranscriptDelta,
)
from omnivox.agent.playout import Playout
from omnivox.agent.reply import Reply
from omnivox.agent.turns import (
    Action,
    BargeIn,
    CommitTurn,
    DropPrepared,
    Emit,
    Floor,
    PauseReply,
    Prepare,
    ResumeReply,
    StopIdle,
    TurnSettings,
    TurnTaking,
)
from omnivox.audio.clips import decode_clip_at
from omnivox.core.errors import InputAudioBufferCommitEmpty, InvalidMessage, OmnivoxError
from omnivox.core.ids import new_id
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.control.internal import Metrics
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.realtime.session_config import (
    OmnivoxOptions,
    SessionConfig,
    TurnDetection,
    apply_update,
)
from omnivox.protocol.wire import Msg
from omnivox.voice.turn.interruption import InterruptionPolicy
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.handler import SessionHandler
from omnivox.worker.realtime.audio_io import InputDecoder, OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item, item_id, item_text
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.hearing import ASR_RATE, Clear, Commit, Configure, Echo, Feed, Hearing
from omnivox.worker.realtime.responses import Responses
from omnivox.worker.realtime.warnings import SettingWarnings, own_recogniser

log = logging.getLogger(__name__)

MIN_COMMIT_MS = 100  # less audio than this cannot be a turn (OpenAI's rule too)
# A turn is not answered while more than this of the user's audio already waits to be heard (it
# came in a burst: held while the session waited for a worker): they went on talking after it, and
# answering now would be cut by their own next words, heard at once. It is answered when that
# audio has been heard, unless it held another turn (which is answered instead).
BACKLOG_MS = 300
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


def turn_settings(vad: TurnDetection | None) -> TurnSettings | None:
    params = turn_params(vad)
    if vad is None or params is None:
        return None
    return TurnSettings(params, vad.create_response, vad.interrupt_response, vad.idle_timeout_ms)


def hearing_event(event: HearingEvent) -> Msg:
    """What the agent heard, as the OpenAI event that says it."""
    if isinstance(event, SpeechStarted):
        return ev.SpeechStarted(audio_start_ms=int(event.audio_ms), item_id=event.turn_id)
    if isinstance(event, SpeechStopped):
        return ev.SpeechStopped(audio_end_ms=int(event.audio_ms), item_id=event.turn_id)
    if isinstance(event, TranscriptDelta):
        return ev.TranscriptionDelta(item_id=event.turn_id, delta=event.text)
    assert isinstance(event, InputCleared)
    return ev.Cleared()


def interruption_policy(options: OmnivoxOptions) -> InterruptionPolicy:
    return InterruptionPolicy(
        resume_ms=options.false_interruption_ms,
        backchannels=tuple(options.backchannels),
        backchannel_max_ms=options.backchannel_max_ms,
        echo_words=options.echo_guard,
    )


def echo_job(options: OmnivoxOptions) -> Echo:
    return Echo(options.echo_canceller, options.echo_gate_factor)


class RealtimeSession(SessionHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        engine = self.host.engine
        self.profile = engine.voice_profile()
        self.config = SessionConfig(instructions=self.profile.system_prompt)
        if self.info.query.get("intent") == "transcription":
            self.config.type = "transcription"
        self.config.audio.output.voice = self.profile.default_voice
        self.warnings = SettingWarnings(self.profile)
        settings = self.settings
        self.config.omnivox = OmnivoxOptions(
            echo_guard=settings.echo_guard,
            echo_canceller=settings.echo_canceller,
            echo_gate_factor=settings.echo_gate_factor,
            false_interruption_ms=settings.false_interruption_ms,
            backchannels=[b.strip() for b in settings.backchannels.split(",") if b.strip()],
            backchannel_max_ms=settings.backchannel_max_ms,
        )
        self.playout = Playout()  # the reply audio as it plays: what was heard, the echo reference
        self.events = Events(
            self.conn,
            beta=self.info.query.get("beta") in ("1", "true"),
            extensions=self.info.behind_gateway or rt.wants_extensions(self.info.query),
        )
        self.conversation = Conversation(self.events.put)
        self.input_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-input")
        self.output_thread = ThreadPoolExecutor(1, thread_name_prefix="rt-output")
        self.decoder = InputDecoder(self.config.audio.input.format, ASR_RATE)
        self.encoder = OutputEncoder(self.config.audio.output.format)
        vad = self.config.audio.input.turn_detection
        listener = engine.open_listener(turn_params(vad), self.settings.barge_in_min_ms)
        self.hearing = Hearing(listener, self.input_thread, self.playout)
        self.hearing.set_echo(echo_job(self.config.omnivox))
        self.turns = TurnTaking(
            turn_settings(vad),
            transcribe=self.config.audio.input.transcription is not None,
            policy=interruption_policy(self.config.omnivox),
            new_id=item_id,  # a user turn is the conversation item it becomes
        )
        self.conversation.transcribing = self.turns.transcribe
        self.responses = Responses(
            engine=engine,
            profile=self.profile,
            events=self.events,
            conversation=self.conversation,
            units=self.conn.units,
            executor=self.output_thread,
            lead_ms=float(self.settings.audio_lead_ms),
            apology=self.settings.failure_apology,
            config=lambda: self.config,
            encoder=lambda: self.encoder,
            on_finished=self._finished,
            playout=self.playout,
        )
        self.events.put(ev.SessionCreated(session=self.config.wire()))
        self._owed: float | None = None  # a turn to answer once the backlog is heard (its speech end)

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
            await self._update_session(event.session)
        elif isinstance(event, rt.InputAudioBufferCommit):
            self.hearing.submit(Commit(event.event_id))
        elif isinstance(event, rt.InputAudioBufferClear):
            self.hearing.submit(Clear(event.event_id))
        elif isinstance(event, rt.ResponseCreate):
            await self._respond(event.response)
        elif isinstance(event, rt.ResponseCancel):
            self.responses.cancel(event.response_id)
        elif isinstance(event, rt.OutputAudioBufferClear):
            self._clear_output()
        elif isinstance(event, rt.ConversationItemCreate):
            await self._create_item(event)
        elif isinstance(event, rt.ConversationItemRetrieve):
            self.conversation.retrieve(event.item_id)
        elif isinstance(event, rt.ConversationItemTruncate):
            item, heard_ms = self.conversation.check_truncation(event.item_id, event.audio_end_ms)
            self.responses.truncate(item, heard_ms)
        elif isinstance(event, rt.ConversationItemDelete):
            self.conversation.delete(event.item_id)

    async def _update_session(self, patch: dict[str, Any]) -> None:
        new = apply_update(self.config, patch)
        new.audio.output.voice = self.profile.resolve_voice(new.audio.output.voice)
        old, self.config = self.config, new
        if new.audio.input.format != old.audio.input.format:
            self.decoder = InputDecoder(new.audio.input.format, ASR_RATE)
        if new.audio.output.format != old.audio.output.format:
            self.encoder = OutputEncoder(new.audio.output.format)
        vad = new.audio.input.turn_detection
        self.turns.vad = turn_settings(vad)
        self.turns.transcribe = self.conversation.transcribing = new.audio.input.transcription is not None
        if vad != old.audio.input.turn_detection:
            self.hearing.submit(Configure(turn_params(vad)))
        if new.omnivox != old.omnivox:
            self.turns.interruption.policy = interruption_policy(new.omnivox)
            if echo_job(new.omnivox) != echo_job(old.omnivox):
                self.hearing.submit(echo_job(new.omnivox))
        warnings = self.warnings.check(patch, new)
        if (asr := new.audio.input.transcription) is not None and not own_recogniser(asr.model):
            asr.model = "default"  # what transcribes (the warning said which was asked for)
        self.events.put(ev.SessionUpdated(session=new.wire()))
        for warning in warnings:
            log.info("session %s: %s (%s)", self.info.session_id or "-", warning.message, warning.param)
            self.events.put(warning)  # only to clients that asked for omnivox's events
        idle = vad is not None and vad.idle_timeout_ms is not None
        if idle and self.responses.active is None and not self.turns.in_turn:
            await self._arm_idle(self.responses.playback_left_s())  # the timer runs from now on

    def _clear_output(self) -> None:
        """``output_audio_buffer.clear``: stop the reply's audio (running, or still playing)."""
        active, last = self.responses.active, self.responses.last
        if active is not None:
            active.cancel("client_cancelled")
            self.events.put(ev.OutputAudioCleared(response_id=active.reply_id))
        elif last is not None and self.responses.playback_left_s() > 0:
            self.responses.cut_playback()
            self.events.put(ev.OutputAudioCleared(response_id=last.reply_id))

    async def _create_item(self, event: rt.ConversationItemCreate) -> None:
        spec = event.item
        if spec.type == "function_call_output":
            if spec.call_id is None or spec.output is None:
                missing = "call_id" if spec.call_id is None else "output"
                raise InvalidMessage(f"a function_call_output needs {missing}", param=f"item.{missing}")
            self.conversation.check_output(spec.call_id)
            item = Item.call_output(spec.call_id, spec.output, id=spec.id or "")
            self.conversation.create(item, event.previous_item_id)
            return
        if spec.type == "function_call":
            if not spec.name:
                raise InvalidMessage("a function_call needs a name", param="item.name")
            call_id = spec.call_id or new_id("call")
            if self.conversation.call_named(call_id) is not None:
                raise InvalidMessage(f"call {call_id!r} already exists", param="item.call_id")
            item = Item.call(call_id, spec.name, spec.arguments or "", id=spec.id or "")
            self.conversation.create(item, event.previous_item_id)
            return
        if spec.role is None:
            raise InvalidMessage("a message needs a role", param="item.role")
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
            job = await hearing.next_job()
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
                if self.turns.interruption.due(hearing.listener.audio_ms):
                    await self._expire()
                if self._owed is not None and hearing.backlog_ms <= BACKLOG_MS and not self.turns.in_turn:
                    speech_end_at, self._owed = self._owed, None
                    if self.responses.active is None:  # (a client's response.create came first)
                        await self.responses.create(None, speech_end_at=speech_end_at)
            elif isinstance(job, Commit):
                await self._commit(job.event_id)
            elif isinstance(job, Clear):
                await hearing.run(hearing.listener.clear)
                self.events.put(ev.Cleared())
            elif isinstance(job, Echo):
                await hearing.run(hearing.set_echo, job)
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

    async def _expire(self) -> None:
        """The reply has been paused for speech with no words settled: decode what was said so far."""
        listener = self.hearing.listener
        text = await self.hearing.run(listener.peek)
        await self.execute(self.turns.expire(text, listener.audio_ms, self._floor()))

    def _floor(self) -> Floor:
        responses = self.responses
        return Floor(
            speaking=responses.speaking(),
            responding=responses.active is not None,
            spoken=responses.spoken_recently() if self.config.omnivox.echo_guard else "",
        )

    async def execute(self, actions: list[Action]) -> None:
        """Carry out what turn-taking decided, in order."""
        for action in actions:
            if isinstance(action, Emit):
                self.events.put(hearing_event(action.event))
            elif isinstance(action, StopIdle):
                await self.conn.units.cancel("idle")
            elif isinstance(action, BargeIn):
                log.info(
                    "barge-in (%s): %r", self.turns.interruption.verdict, self.turns.interruption.heard_text
                )
                self.responses.interrupt(action.reason)
            elif isinstance(action, PauseReply):
                log.info("speech over the reply: paused")
                self.responses.pause()
            elif isinstance(action, ResumeReply):
                log.info("resumed (%s): %r", action.reason, self.turns.interruption.heard_text)
                self.responses.resume(action.reason)
            elif isinstance(action, Prepare):
                if not self.config.transcription_only:
                    await self.responses.speculate(action.text)
            elif isinstance(action, DropPrepared):
                await self.responses.discard_speculation()
            elif isinstance(action, CommitTurn):
                item = self.conversation.commit_user_turn(action.turn_id, action.text)
                if action.respond and not self.config.transcription_only:
                    await self.conn.units.cancel("idle")
                    if self.hearing.backlog_ms > BACKLOG_MS:
                        self._owed = action.speech_end_at  # answered once the rest is heard
                        await self.responses.discard_speculation()
                    else:
                        self._owed = None
                        if not await self.responses.confirm(item, action.speech_end_at):
                            await self.responses.create(None, speech_end_at=action.speech_end_at)

    async def _respond(
        self, params: rt.ResponseParams | None, extra: list[ChatMessage] | None = None
    ) -> None:
        if self.config.transcription_only:
            raise InvalidMessage("a transcription session makes no responses", param="session.type")
        await self.conn.units.cancel("idle")
        await self.responses.create(params, extra=extra)

    # ---- after a response

    async def _finished(self, response: Reply) -> None:
        figures = response.figures
        # a failed reply is told in its response.done alone (stock clients take an error event as
        # the session's end); the gateway counts it
        asr_busy, asr_audio = self.hearing.take_figures()
        self.internal(
            Metrics(
                error_code=figures.error.wire_code if figures.error is not None else None,
                voice_to_voice_s=figures.voice_to_voice_s,
                llm_ttft_s=figures.llm_ttft_s,
                tts_ttfa_s=figures.tts_ttfa_s,
                interrupted=response.state is ReplyState.CANCELLED,
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
        if self.responses.active or self.turns.in_turn or self.config.transcription_only:
            return
        self.events.put(
            ev.TimeoutTriggered(
                audio_start_ms=int(start_ms), audio_end_ms=int(listener.audio_ms), item_id=item_id()
            )
        )
        await self._respond(None, extra=[ChatMessage(role="user", content=SILENCE_MARKER)])
