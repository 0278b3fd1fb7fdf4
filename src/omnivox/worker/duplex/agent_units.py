"""Duplex over voice models: the unit loop's decisions made by the voice agent (``agent.loop``).

An engine with voice models but no duplex model of its own (the cascade, the pipeline) serves a
duplex session this way: the agent hears every unit and answers turns exactly as it does a realtime
session (turn-taking, barge-in, a cough or a backchannel that resumes the reply, its own echo
gated out); this adapter only turns its events into units. Per unit (``worker.duplex.units``):

- ``step`` hands the chunk to the agent and decides the unit. When the user was speaking, it first
  lets the hearing catch up with this chunk (bounded by ``SETTLE_MS``), so a turn that ends in this
  unit is answered in it; a reply that started in it gets as long to have its first audio.
- Speaking: the unit carries the reply audio that is ready, up to one unit of it (``UnitPacing``
  lets a unit's worth out per unit), with the text of each sentence alongside its first audio
  (text deltas: their concatenation is what was said). The unit that empties a finished reply
  ends the turn; a reply cut by the user's words ends it in a listening unit.
- Listening: no reply, a paused one (speech over it, not judged yet: what it would have said is
  kept), or a unit the client forces to listen.

The agent runs on the session's stream clock (the user's audio fed so far): the audio a unit says
plays while the client records the next chunk, so the playout ledger places it there (after what
still plays, and from then on when the client's player ran dry), and each chunk is heard against
the reply audio that played while it was recorded, at any pace. In omni mode the latest frame goes
to the LLM with the user's words when the LLM sees images.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable

import numpy as np

from omnivox.agent.events import (
    AgentEvent,
    Failure,
    ReplyAudio,
    ReplyEnded,
    ReplyReport,
    ReplyResumed,
    ReplySentence,
    ReplyState,
    UserTurn,
)
from omnivox.agent.hearing import Echo
from omnivox.agent.interruption import InterruptionPolicy, Line
from omnivox.agent.loop import AgentSettings, VoiceAgent
from omnivox.agent.pacing import UnitPacing
from omnivox.agent.reply import Reply, ReplyPlan
from omnivox.agent.turns import TurnSettings
from omnivox.connection.units import WorkUnits
from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError, PrepareRequired
from omnivox.engines.duplex import INPUT_SAMPLE_RATE, DuplexParams, DuplexReady, DuplexUnit
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.video.frames import encode_jpeg
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import history_tokens, trim_history
from omnivox.voice.models import VoiceModels, VoiceProfile
from omnivox.voice.reply import ReplyRequest
from omnivox.voice.vad.turn import TurnParams
from omnivox.worker.duplex.inputs import Chunk
from omnivox.worker.duplex.units import UnitCosts

log = logging.getLogger(__name__)

OUTPUT_RATE = 24000
# How long a unit may wait for the hearing to catch up with the unit's audio and for a reply that
# has just started to have its first audio: a reply that is ready in time is spoken in the unit that
# heard the end of the turn, not one unit (a second) later.
SETTLE_MS = 120
SPECULATE_AT = 0.6
GRANT_WAIT_S = 1.0  # (a bound: a unit's audio goes out in a few loop turns)
AGENT = "agent"  # the agent's loop, a work unit of the session


class StreamClock:
    """The session's time: seconds of the user's audio fed so far (from an arbitrary epoch)."""

    def __init__(self, epoch: float = 1000.0) -> None:
        self.epoch = epoch
        self.samples = 0

    def __call__(self) -> float:
        return self.epoch + self.samples / INPUT_SAMPLE_RATE


class AgentUnits:
    """A duplex session's units decided by a ``VoiceAgent`` (see the module docstring)."""

    def __init__(
        self,
        voice: VoiceModels,
        units: WorkUnits,
        settings: Settings,
        report: Callable[[OmnivoxError], None] = lambda err: None,
        figures: Callable[[ReplyReport], None] = lambda report: None,
    ) -> None:
        self.voice = voice
        self.units = units  # the session's work units (the agent's loop, its replies)
        self.settings = settings
        self.report = report  # a failure the agent survived (a lost ASR stage): said to the client
        self.figures = figures  # a heard reply's figures (its breakdown): for the gateway's metrics
        self.clock = StreamClock()
        self.pacing = UnitPacing()
        self.agent: VoiceAgent | None = None
        self.profile: VoiceProfile | None = None
        self.params = DuplexParams()
        self.voice_name: str | None = None
        self.sees = False  # the LLM is given the latest frame with the user's words
        self.history: list[ChatMessage] = []
        self.resumed: list[str] = []  # why each pause over a reply resumed (no_words, backchannel, echo)
        self.latest_frame: np.ndarray | None = None
        self._speaking: Reply | None = None  # the reply whose audio the units carry
        self._audio: list[np.ndarray] = []  # this unit's reply audio, as it goes out
        self._texts: list[str] = []  # and the sentences that begin in it
        self._sentence: str | None = None  # a sentence whose first audio has not gone out yet

    # ---- UnitSource

    async def prepare(self, params: DuplexParams) -> DuplexReady:
        await self.cleanup()
        self.params = params
        profile = self.profile = self.voice.profile()
        self.voice_name = profile.resolve_voice(params.voice)
        self.sees = params.mode == "omni" and profile.vision
        prompt = params.system_prompt or profile.system_prompt
        self.history = [ChatMessage(role="system", content=prompt)] if prompt else []
        s = self.settings
        self.agent = VoiceAgent(
            self.voice,
            emit=self._on_event,
            plan=self._plan,
            units=self.units,
            pacing=self.pacing,
            settings=AgentSettings(
                turns=TurnSettings(TurnParams()),
                interruption=InterruptionPolicy(
                    resume_ms=s.false_interruption_ms,
                    backchannels=tuple(b.strip() for b in s.backchannels.split(",") if b.strip()),
                    backchannel_max_ms=s.backchannel_max_ms,
                    echo_words=s.echo_guard,
                    line=Line.WIDEBAND,  # a client's microphone: no phone adapter builds duplex sessions
                ),
                echo=Echo(s.echo_canceller, s.echo_gate_factor),
                transcribe=False,
            ),
            confirm_ms=s.barge_in_min_ms,
            # the ASR is flushed later in a pause than a realtime session's (at 60% of the silence
            # that ends a turn): still early enough that the turn's final transcript costs little
            # and the reply starts in the unit that heard the end of the turn, and late enough that
            # "mm hmm" is heard whole, not as "mm" and "hmm" apart (a backchannel, not words)
            speculate_at=SPECULATE_AT,
            clock=self.clock,
            waits_for_audio=True,  # the client plays each unit's audio as it gets it
        )
        await self.units.start(AGENT, self.agent.run())
        notes: tuple[str, ...] = ()
        if params.mode == "omni" and not self.sees:
            notes = ("frames are accepted and ignored: the LLM does not see images",)
        return DuplexReady(vision=self.sees, notes=notes)

    async def step(self, chunk: Chunk, force_listen: bool, finalize: bool) -> UnitCosts:
        t0 = time.perf_counter()
        self.hear(chunk)
        t1 = time.perf_counter()
        unit = await self.decide(force_listen)
        t2 = time.perf_counter()
        return UnitCosts(unit, (t1 - t0) * 1000, (t2 - t1) * 1000, 0.0, history_tokens(self.history))

    def hear(self, chunk: Chunk) -> None:
        """Hand the unit's audio (and frames) to the agent; it is heard on the input thread."""
        agent = self._agent()
        self.clock.samples += len(chunk.audio)
        agent.feed(chunk.audio, self.clock())  # complete now, on the stream clock
        if chunk.frames and self.sees:
            self.latest_frame = chunk.frames[-1]

    async def finalize(self) -> float:
        return 0.0  # nothing to close: the LLM's history is trimmed when a reply is planned

    async def cleanup(self) -> None:
        agent, self.agent = self.agent, None
        if agent is None:
            return
        await self.units.cancel(AGENT)
        await agent.close()
        self._speaking = None

    async def caught_up(self, wait_s: float = 10.0) -> bool:
        """Until the agent has heard every chunk handed to it (units faster than real time)."""
        return await self._agent().caught_up(wait_s)

    # ---- deciding a unit

    async def decide(self, force_listen: bool) -> DuplexUnit:
        """This unit: speak the reply audio that is ready (up to a unit of it), or listen."""
        agent = self._agent()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_MS / 1000
        if agent.in_turn:  # the turn may end in this unit: let the hearing catch up (bounded)
            await agent.caught_up(max(0.0, deadline - loop.time()))
        speaking = self._speaking
        active = agent.replies.active
        if speaking is not None and speaking.state is ReplyState.CANCELLED:
            self._speaking = None  # cut by the user's words: its turn ends with this unit
            return DuplexUnit(is_listen=True, end_of_turn=True)
        if speaking is not None and speaking.over and active is not None and active is not speaking:
            self._speaking = None  # said to its end; the next reply speaks from the next unit
            return DuplexUnit(is_listen=True, end_of_turn=speaking.playback.sent_ms > 0)
        if active is not None and active is not speaking and not active.over:
            speaking = self._speaking = active
            if not force_listen:  # a reply that starts now may have its first audio at once
                await self._first_audio(active, deadline)
        if speaking is None or force_listen or speaking.state is ReplyState.PAUSED:
            return DuplexUnit(is_listen=True)
        self._audio, self._texts = [], []
        want = self.params.chunk_ms * OUTPUT_RATE // 1000
        await self.pacing.grant(want, lambda: speaking.idle, GRANT_WAIT_S)
        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
        text = "".join(self._texts)
        done = speaking.state in (ReplyState.DONE, ReplyState.FAILED)
        if done:
            self._speaking = None
        if not len(audio):
            return DuplexUnit(is_listen=True, end_of_turn=done and speaking.playback.sent_ms > 0)
        return DuplexUnit(is_listen=False, text=text, audio=audio, end_of_turn=done, tokens=len(text.split()))

    async def _first_audio(self, reply: Reply, deadline: float) -> None:
        """Until ``reply`` has audio to say (or cannot: paused, over), at most until ``deadline``."""
        loop = asyncio.get_running_loop()
        while loop.time() < deadline:
            if self.pacing.starved or reply.over or reply.state is ReplyState.PAUSED:
                return
            await asyncio.sleep(0.002)

    # ---- the agent's side

    def _agent(self) -> VoiceAgent:
        if self.agent is None:
            raise PrepareRequired("no duplex session: prepare one first")
        return self.agent

    def _plan(self, extra: list[ChatMessage]) -> ReplyPlan:
        """The reply to the conversation so far (and ``extra``: the words still being said)."""
        profile = self.profile
        assert profile is not None
        said = [self._with_frame(m) for m in extra]
        messages = trim_history(
            self.history + said, profile.context_tokens, reserve_tokens=profile.max_reply_tokens
        )
        llm = LlmParams(temperature=self.params.temperature, max_tokens=profile.max_reply_tokens)
        return ReplyPlan(ReplyRequest(messages, llm, speak=True, voice=self.voice_name))

    def _with_frame(self, message: ChatMessage) -> ChatMessage:
        """A user message with the latest frame, when the LLM sees it."""
        if self.latest_frame is None or message.role != "user" or not isinstance(message.content, str):
            return message
        image = base64.b64encode(encode_jpeg(self.latest_frame)).decode()
        return ChatMessage(role="user", content=[TextPart(text=message.content), ImagePart(data=image)])

    def _on_event(self, event: AgentEvent) -> None:
        if isinstance(event, UserTurn):
            if event.text:
                self.history.append(self._with_frame(ChatMessage(role="user", content=event.text)))
        elif isinstance(event, ReplySentence):
            self._sentence = event.text if event.index == 0 else " " + event.text
        elif isinstance(event, ReplyAudio):
            self._audio.append(event.audio)
            if self._sentence is not None:
                self._texts.append(self._sentence)
                self._sentence = None
        elif isinstance(event, ReplyResumed):
            self.resumed.append(event.reason)
            log.info("duplex: resumed (%s)", event.reason)
        elif isinstance(event, ReplyEnded):
            self._sentence = None
            if event.state is not ReplyState.DISCARDED and event.heard:
                self.history.append(ChatMessage(role="assistant", content=event.heard))
            if event.state is ReplyState.FAILED and event.figures.error is not None:
                log.warning("duplex reply failed: %s", event.figures.error.message)
        elif isinstance(event, ReplyReport):
            self.figures(event)
        elif isinstance(event, Failure):
            self.report(event.error)
