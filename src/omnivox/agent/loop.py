"""The voice agent: one spoken conversation's loop (hear -> judge the turn -> reply -> barge-in ->
keep what was heard), whatever protocol carries it.

Commands come in from a protocol adapter (``worker.realtime``, ``worker.duplex``):

- ``feed(audio, arrival)``, ``commit(tag)``, ``clear(tag)``: the user's audio, in order (hearing:
  ``agent.hearing``);
- ``configure(settings)``: turn detection, interruption, the echo canceller, what to emit;
- ``respond(plan)``, ``cancel(reply_id)``, ``truncate(playback, heard_ms)``, ``stop_speaking()``:
  replies the adapter asks for or stops;
- ``transcribe(audio)``: a clip outside the live stream.

Typed events go out through ``emit`` as they happen, in order (``agent.events``): speech started and
stopped, transcript deltas, the user's turn, each reply's life (started, words, sentences and audio,
paused, resumed, ended with what was heard), its figures, idle prompts and failures it survived. The
adapter words them in its protocol; nothing here knows one.

The loop (``run``) takes the hearing's jobs in order: the listener's events go through turn-taking
(``agent.turns``), whose typed actions it carries out on the replies (``agent.replies``) and the
playout ledger (``agent.playout``). What a reply says next is the adapter's to plan (``plan``: the
conversation is the adapter's); when the agent answers a turn by itself it asks for that plan.

The threading rule (docs/architecture.md): the agent owns two threads. Its input thread opens and
feeds the listener (VAD, ASR), its output thread runs the replies (LLM, TTS), so hearing a barge-in
never waits for speech synthesis; everything else (turn-taking, pacing, the ledger's writes, every
event) runs on the event loop, and ``agent.threads`` is the one bridge between them.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from omnivox.agent.events import AgentEvent, Failure, IdleTimeout, InputCleared, ReplyReport, UserTurn
from omnivox.agent.hearing import ChunkHeard, Clear, Commit, Configure, Denoise, Echo, Feed, Hearing
from omnivox.agent.interruption import InterruptionPolicy
from omnivox.agent.pacing import Pacing
from omnivox.agent.playout import Playback, Playout
from omnivox.agent.replies import Replies
from omnivox.agent.reply import Reply, ReplyPlan
from omnivox.agent.threads import SerialThread
from omnivox.agent.traces import AgentTraces, turn_detection
from omnivox.agent.turn_timing import TurnTimer
from omnivox.agent.turns import (
    Action,
    BargeIn,
    CommitTurn,
    DropPrepared,
    Emit,
    Floor,
    PauseReply,
    Prefill,
    Prepare,
    ResumeReply,
    StopIdle,
    TurnSettings,
    TurnTaking,
    turn_id,
)
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import InputAudioBufferCommitEmpty
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.models import VoiceModels
from omnivox.voice.reply import ReplyRequest
from omnivox.voice.stack import ASR_RATE

log = logging.getLogger(__name__)

MIN_COMMIT_MS = 100  # less audio than this cannot be a turn (OpenAI's rule too)
# A turn is not answered while more than this of the user's audio already waits to be heard (it
# came in a burst: held while the session waited for a worker): they went on talking after it, and
# answering now would be cut by their own next words, heard at once. It is answered when that
# audio has been heard, unless it held another turn (which is answered instead).
BACKLOG_MS = 300
SILENCE_MARKER = "..."  # what the user "said" when the idle timeout prompts them
IDLE = "idle"  # the idle timer's work unit

# What the agent says next: the adapter's plan of a reply to its conversation with ``extra``
# messages after it (the words the user is still saying, for a reply prepared in their pause).
Planner = Callable[[list[ChatMessage]], ReplyPlan]
# The request a reply to the conversation with ``extra`` messages after it would make, planned for
# nothing but its prompt (the LLM computes it ahead while the user speaks: ``Prefill``).
Prompter = Callable[[list[ChatMessage]], ReplyRequest]


@dataclass(frozen=True)
class AgentSettings:
    """How the agent hears and answers (the adapter's, from its protocol's session settings)."""

    turns: TurnSettings | None = field(default_factory=TurnSettings)  # None: manual turns
    interruption: InterruptionPolicy = field(default_factory=InterruptionPolicy)
    echo: Echo = field(default_factory=lambda: Echo("gate", 0.7))  # the canceller the input is heard through
    noise: Denoise = field(default_factory=Denoise)  # the noise suppressor after it (none by default)
    transcribe: bool = True  # emit the user's words as they settle (``TranscriptDelta``)
    answer: bool = True  # answer turns (False: transcription only: the agent never replies)


class VoiceAgent:
    def __init__(
        self,
        voice: VoiceModels,
        *,
        emit: Callable[[AgentEvent], None],
        plan: Planner,
        units: WorkUnits,
        pacing: Pacing,
        settings: AgentSettings | None = None,
        confirm_ms: float = 150.0,
        speculate_at: float | None = 0.1,
        prompt: Prompter | None = None,
        turn_ids: Callable[[], str] = turn_id,
        drop_unsent: Callable[[str], float] = lambda reply_id: 0.0,
        clock: Callable[[], float] = time.monotonic,
        waits_for_audio: bool = False,
    ) -> None:
        self.settings = settings = settings or AgentSettings()
        # the session's spans (nothing while tracing is off): they see every event on its way out
        self.traces = AgentTraces(
            model=voice.profile().llm_name, mode=lambda: turn_detection(self.settings.turns), clock=clock
        )
        self.emit = emit = self.traces.observe(emit)
        self.planner = plan
        self.prompt = prompt  # None: nothing is prefilled while the user speaks
        self.units = units
        self.input_thread = SerialThread("agent-input")
        self.output_thread = ThreadPoolExecutor(1, thread_name_prefix="agent-output")
        # the reply audio as it plays: what was heard, the echo reference (``waits_for_audio``: the
        # listener's player waits when it runs dry, as a duplex client's does between units)
        self.playout = Playout(clock, waits_for_audio)
        params = settings.turns.params if settings.turns is not None else None
        # in this session's context (its trace): a pipeline's hearing request is one of its spans
        opened = self.input_thread.submit(
            contextvars.copy_context().run, voice.open_listener, params, confirm_ms, speculate_at
        )
        listener = opened.result()
        listener.witness = settings.interruption.weighs_witness  # (before the thread hears anything)
        self.hearing = Hearing(listener, self.input_thread, self.playout)
        self.hearing.set_echo(settings.echo)
        self.turns = TurnTaking(
            settings.turns, transcribe=settings.transcribe, policy=settings.interruption, new_id=turn_ids
        )
        self.replies = Replies(
            produce=voice.reply,
            prefill=voice.prefill,
            emit=emit,
            playout=self.playout,
            units=units,
            executor=self.output_thread,
            pacing=pacing,
            on_finished=self._finished,
            drop_unsent=drop_unsent,
            clock=clock,
        )
        self.turn_timer = TurnTimer(clock)  # the hearing's side of each turn's breakdown
        self._owed: float | None = None  # a turn to answer once the backlog is heard (its speech end)
        self._fed = self._heard = 0  # chunks fed, and heard (with what turn-taking made of them)
        self._progress = asyncio.Event()  # a chunk was heard

    async def close(self) -> None:
        """Stop the replies and the idle timer, then the threads (they finish their current step
        before the models are reset). The adapter stops ``run``."""
        for reply in (self.replies.active, self.replies.held):
            if reply is not None:
                reply.cancel("client_cancelled")
        await self.replies.stop()
        await self.units.cancel(IDLE)
        await asyncio.to_thread(self.input_thread.shutdown, True, cancel_futures=True)
        await asyncio.to_thread(self.output_thread.shutdown, True, cancel_futures=True)

    # ---- what the adapter reads

    @property
    def audio_ms(self) -> float:
        """The user's audio heard so far (stream time)."""
        return self.hearing.listener.audio_ms

    @property
    def in_turn(self) -> bool:
        """The user has started a turn that is not committed yet."""
        return self.turns.in_turn

    @property
    def replying(self) -> bool:
        """A reply is speaking."""
        return self.replies.active is not None

    # ---- commands: the user's audio, in order

    def feed(self, audio: np.ndarray, arrival: float) -> None:
        """The next chunk of the user's audio (float32 at 16 kHz), complete at ``arrival`` (on the
        agent's clock)."""
        self._fed += 1
        self.hearing.submit(Feed(audio, arrival))

    async def caught_up(self, wait_s: float) -> bool:
        """Wait until every chunk fed has been heard and acted on (False: not within ``wait_s``)."""
        try:
            async with asyncio.timeout(wait_s):
                while self._heard < self._fed:
                    self._progress.clear()
                    await self._progress.wait()
        except TimeoutError:
            return False
        return True

    def commit(self, tag: str | None = None) -> None:
        """End the user's turn now (manual turns): what was fed before is the turn."""
        self.hearing.submit(Commit(tag))

    def clear(self, tag: str | None = None) -> None:
        """Drop the audio fed since the last turn (``InputCleared`` once it is dropped)."""
        self.hearing.submit(Clear(tag))

    # ---- commands: settings, replies

    async def configure(self, settings: AgentSettings) -> None:
        """New settings, in effect from the audio fed after this on."""
        old, self.settings = self.settings, settings
        turns = self.turns
        turns.vad = settings.turns
        turns.transcribe = settings.transcribe
        witness = settings.interruption.weighs_witness
        if settings.turns != old.turns or witness != old.interruption.weighs_witness:
            params = settings.turns.params if settings.turns is not None else None
            self.hearing.submit(Configure(params, witness))
        if settings.interruption != old.interruption:
            turns.interruption.policy = settings.interruption
        if settings.echo != old.echo:
            self.hearing.submit(settings.echo)
        if settings.noise != old.noise:
            self.hearing.submit(settings.noise)
        idle = settings.turns is not None and settings.turns.idle_timeout_ms is not None
        if idle and not self.replying and not turns.in_turn:
            await self._arm_idle(self.replies.playback_left_s())  # the timer runs from now on

    async def respond(self, plan: Callable[[], ReplyPlan]) -> Reply:
        """A reply now (the adapter's request); raises ``ActiveResponse`` while one is speaking."""
        await self.units.cancel(IDLE)
        return await self.replies.create(lambda: self.traces.traced(plan()))

    def cancel(self, reply_id: str | None = None) -> None:
        """Stop the speaking reply (``reply_id``: only if it is that one); raises
        ``ResponseCancelNotActive`` if there is none."""
        self.replies.cancel(reply_id)

    def truncate(self, playback: Playback, heard_ms: float) -> bool:
        """The listener heard the reply whose audio is ``playback`` up to ``heard_ms``. True: it was
        still being said and stops there now (its ``ReplyEnded`` says so); False: it was over (its
        playback stops there; what was heard of it is the adapter's to keep)."""
        return self.replies.truncate(playback, heard_ms)

    def reports_playback(self) -> None:
        """The listener will report when its player starts and stops each reply (a carrier has
        the audio queued): the ledger waits for those reports rather than its own model's end."""
        self.playout.expect_reports()

    def played(self, reply_id: str, started: bool, at: float) -> None:
        """The listener's player reports it ``started`` the reply ``reply_id`` at ``at`` (on the
        agent's clock), or (not ``started``) that it has played all of it: the playout ledger counts
        playback by these reports from now on (``Replies.heard``)."""
        error_ms = self.replies.heard(reply_id, started, at)
        if error_ms is not None:
            said = "started" if started else "stopped"
            log.info("listener %s %s %+.0f ms against the playback model", said, reply_id, error_ms)

    def stop_speaking(self) -> str | None:
        """Stop the reply's audio, whether it is still being said or only still playing; returns
        the id of the reply that was stopped (None: nothing was playing)."""
        active, last = self.replies.active, self.replies.last
        if active is not None:
            active.cancel("client_cancelled")
            return active.reply_id
        if last is not None and self.replies.playback_left_s() > 0:
            self.replies.cut_playback()
            return last.reply_id
        return None

    async def transcribe(self, audio: np.ndarray) -> str:
        """The words of a clip (16 kHz) outside the live stream; raises ``RuntimeError`` while the
        recogniser is busy with live speech."""
        return await self.hearing.run(self.hearing.listener.transcribe_clip, audio)

    # ---- the loop

    async def run(self) -> None:
        """Audio-ordered jobs (audio, commits, clears, settings) through the input thread, in order,
        and what turn-taking makes of what was heard. Runs until cancelled."""
        hearing = self.hearing
        while True:
            job = await hearing.next_job()
            if isinstance(job, Feed):
                await self._hear(hearing.take_feeds(job))
            elif isinstance(job, Commit):
                await self._commit(job.tag)
            elif isinstance(job, Clear):
                await hearing.run(hearing.listener.clear)
                self.emit(InputCleared())
            elif isinstance(job, Echo):
                await hearing.run(hearing.set_echo, job)
            elif isinstance(job, Denoise):
                await hearing.run(hearing.set_noise, job)
            else:
                await hearing.run(hearing.listener.configure, job.params, job.witness)

    async def _hear(self, feeds: list[Feed]) -> None:
        """Hear the chunks (one trip to the input thread) and act on each in order, as if each had
        gone alone (``agent.hearing``)."""
        hearing = self.hearing
        trip = await hearing.feed(feeds)
        for chunk in trip.chunks:
            hearing.done(chunk.feed)  # (not waiting any more: ``backlog_ms`` while it is acted on)
            try:
                await self._act(chunk)
            finally:
                self._chunk_heard()
        if trip.error is not None:
            hearing.done(feeds[len(trip.chunks)])  # the chunk that failed is not heard again
            self._chunk_heard()
            if trip.error.fatal:
                raise trip.error
            self.emit(Failure(trip.error))  # e.g. stage_lost: the next turn is heard again

    def _chunk_heard(self) -> None:
        self._heard += 1
        self._progress.set()

    async def _act(self, chunk: ChunkHeard) -> None:
        """What turn-taking makes of one chunk heard."""
        hearing = self.hearing
        self.turn_timer.chunk(chunk.pause_started_ms)
        for heard in chunk.heard:
            actions = self.turns.heard(heard, chunk.feed.arrival, self._floor(chunk.feed.arrival))
            self.turn_timer.heard(heard, actions)
            await self._execute(actions)
        if self.turns.interruption.due(chunk.audio_ms):
            await self._expire()
        if self._owed is not None and hearing.backlog_ms <= BACKLOG_MS and not self.turns.in_turn:
            speech_end_at, self._owed = self._owed, None
            if not self.replying:  # (the adapter's own request came first)
                await self.replies.create(partial(self._plan, [], speech_end_at))

    async def _commit(self, tag: str | None) -> None:
        pending_ms = self.hearing.listener.pending_samples * 1000 / ASR_RATE
        if pending_ms < MIN_COMMIT_MS:
            err = InputAudioBufferCommitEmpty(
                f"the input buffer holds {pending_ms:.0f} ms of audio; {MIN_COMMIT_MS} ms are needed"
            )
            self.emit(Failure(err, tag))
            return
        heard = await self.hearing.run(self.hearing.listener.commit)
        await self._execute(self.turns.commit(heard.text, keep_empty=True))

    async def _expire(self) -> None:
        """The reply has been paused for speech with no words settled: decode what was said so far."""
        listener = self.hearing.listener
        heard = await self.hearing.run(listener.peek_heard)
        await self._execute(self.turns.expire(heard, self._floor()))

    def _floor(self, arrival: float | None = None) -> Floor:
        """The assistant's side as the user's audio that ``arrival`` brought meets it (None: now)."""
        replies = self.replies
        echo_words = self.settings.interruption.echo_words
        return Floor(
            speaking=replies.speaking(),
            responding=replies.active is not None,
            spoken=replies.spoken_recently() if echo_words else "",
            played_out_s=None if replies.active is not None else self.playout.played_out_s(arrival),
            left_s=self.playout.ends_in_s(arrival),
        )

    def _plan(self, extra: list[ChatMessage], speech_end_at: float | None = None) -> ReplyPlan:
        return self.traces.traced(replace(self.planner(extra), speech_end_at=speech_end_at))

    async def _execute(self, actions: list[Action]) -> None:
        """Carry out what turn-taking decided, in order."""
        replies = self.replies
        for action in actions:
            if isinstance(action, Emit):
                self.emit(action.event)
            elif isinstance(action, StopIdle):
                await self.units.cancel(IDLE)
            elif isinstance(action, BargeIn):
                judge = self.turns.interruption
                log.info("barge-in (%s): %r", judge.verdict, judge.heard_text)
                replies.interrupt(action.reason)
            elif isinstance(action, PauseReply):
                at_end = self.turns.interruption.at_reply_end
                log.info("speech over the reply%s: paused", " (as it played out)" if at_end else "")
                replies.pause(at_end)
            elif isinstance(action, ResumeReply):
                log.info("resumed (%s): %r", action.reason, self.turns.interruption.heard_text)
                replies.resume(action.reason)
            elif isinstance(action, Prepare):
                if self.settings.answer:
                    tentative = [ChatMessage(role="user", content=action.text)]
                    await replies.speculate(partial(self._plan, tentative), action.text)
            elif isinstance(action, DropPrepared):
                await replies.discard_speculation()
            elif isinstance(action, Prefill):
                if self.settings.answer and self.prompt is not None:
                    words = [ChatMessage(role="user", content=action.text)]
                    replies.prefill(partial(self.prompt, words))
            elif isinstance(action, CommitTurn):
                turn = UserTurn(action.turn_id, action.text)
                self.emit(turn)
                self.traces.user_turn(turn, self.turn_timer.turn(action.speech_end_at))
                if action.respond and self.settings.answer:
                    await self._answer(action.text, action.speech_end_at)

    async def _answer(self, text: str, speech_end_at: float | None) -> None:
        """The user's turn ended with ``text``: the reply prepared for it, or a new one."""
        await self.units.cancel(IDLE)
        if self.hearing.backlog_ms > BACKLOG_MS:
            self._owed = speech_end_at  # answered once the rest is heard
            await self.replies.discard_speculation()
            return
        self._owed = None
        if not await self.replies.confirm(text, speech_end_at):
            await self.replies.create(partial(self._plan, [], speech_end_at))

    # ---- after a reply

    async def _finished(self, reply: Reply) -> None:
        asr_busy, asr_audio = self.hearing.take_figures()
        self.turn_timer.fill(reply.plan.speech_end_at, reply.figures.times)
        self.traces.reply_over(reply)
        self.emit(ReplyReport(reply.reply_id, reply.state, reply.figures, asr_busy, asr_audio))
        await self._execute(self.turns.reply_over(self._floor()))
        await self._arm_idle(self.replies.playback_left_s())

    async def _arm_idle(self, playback_left_s: float) -> None:
        """(Re)start the idle timer: it runs from when the reply's audio has finished playing."""
        turns = self.settings.turns
        if turns is None or turns.idle_timeout_ms is None:
            return
        await self.units.start(IDLE, self._idle(playback_left_s + turns.idle_timeout_ms / 1000))

    async def _idle(self, delay_s: float) -> None:
        start_ms = self.audio_ms
        await asyncio.sleep(delay_s)
        if self.replying or self.turns.in_turn or not self.settings.answer:
            return
        self.emit(IdleTimeout(start_ms, self.audio_ms))
        silence = [ChatMessage(role="user", content=SILENCE_MARKER)]
        await self.respond(partial(self._plan, silence))
