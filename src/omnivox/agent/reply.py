"""One reply: the voice models' answer (LLM -> words -> sentences -> TTS) said at the pace it plays.

A reply's life is an explicit state machine (``ReplyState``):

    HELD ──release──> SPEAKING ──> DONE | CANCELLED | FAILED
      │                 │  ^
      │            pause│  │resume
      │                 v  │
      │                PAUSED ──> CANCELLED | FAILED
      └───discard───> DISCARDED

A reply prepared during the user's pause starts HELD: the models already write and speak it on the
output thread, but nothing is said until ``release``; ``discard`` ends it without a single event
beyond its ``ReplyEnded``. Any other reply starts SPEAKING. ``cancel`` (a barge-in, or the adapter)
stops both sides at once: the thread at its next check, the event side immediately; audio the
adapter had not sent yet is dropped (``drop_unsent``) and the reply keeps only the words the user
heard (whole sentences played, plus the played share of the sentence that was cut: the playout
ledger's ``Playback`` says which).

``pause`` (speech over the reply, not yet judged) stops its audio at once without ending it: no more
audio goes out (the models go on writing), ``ReplyPaused`` says where it stopped, and playback is
modelled as stopped there. ``resume`` plays on from that point (``ReplyResumed``): nothing was cut
and the listener gets every sample once. ``cancel`` from a pause cuts it where it paused. A reply
that has finished but whose audio still plays pauses (and resumes) its playback alone.

Audio goes out in frames, each when its ``Pacing`` allows (``agent.pacing``): at most ``lead_ms``
ahead of real time for a streaming client, so an interruption leaves little stale audio at the
listener; a unit's worth per unit for a duplex one. The output thread
hands the event side the models' pieces (``voice.reply``) through ``agent.threads``; what the reply
says comes out as ``agent.events`` (no protocol's words: an adapter words them).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from omnivox.agent.events import (
    ReplyAudio,
    ReplyCall,
    ReplyEnded,
    ReplyEvent,
    ReplyFigures,
    ReplyPaused,
    ReplyResumed,
    ReplySentence,
    ReplyStarted,
    ReplyState,
    ReplyText,
    ReplyTool,
)
from omnivox.agent.pacing import Pacing
from omnivox.agent.playout import Playback
from omnivox.agent.threads import ThreadStream
from omnivox.core.errors import as_omnivox_error
from omnivox.core.ids import new_id
from omnivox.core.transitions import Machine
from omnivox.voice.llm.base import ToolCallDelta, Usage
from omnivox.voice.reply import FirstToken, ReplyFailed, ReplyPiece, ReplyRequest, Spoken, Word
from omnivox.voice.tool_calls import ToolResult, ToolRunning

RATE = 24000  # reply audio: the TTS's rate
FRAME_MS = 100  # audio per frame sent

R = ReplyState
TRANSITIONS: dict[ReplyState, frozenset[ReplyState]] = {
    R.HELD: frozenset({R.SPEAKING, R.DISCARDED}),
    R.SPEAKING: frozenset({R.PAUSED, R.DONE, R.CANCELLED, R.FAILED}),
    R.PAUSED: frozenset({R.SPEAKING, R.CANCELLED, R.FAILED}),
    R.DONE: frozenset(),
    R.CANCELLED: frozenset(),
    R.FAILED: frozenset(),
    R.DISCARDED: frozenset(),
}

Produce = Callable[[ReplyRequest, threading.Event], Iterator[ReplyPiece]]


def reply_id() -> str:
    return new_id("reply")


@dataclass
class ReplyPlan:
    """What to say (the request to the voice models) and under which id its events go."""

    request: ReplyRequest
    reply_id: str = field(default_factory=reply_id)
    speech_end_at: float | None = None  # monotonic time the user's speech ended, if it prompted this

    @property
    def audio(self) -> bool:
        return self.request.speak


class Reply:
    def __init__(
        self,
        plan: ReplyPlan,
        produce: Produce,
        emit: Callable[[ReplyEvent], None],
        playback: Playback,
        executor: Executor,
        pacing: Pacing,
        *,
        held: bool = False,
        clock: Callable[[], float] = time.monotonic,
        drop_unsent: Callable[[str], float] = lambda reply_id: 0.0,
    ) -> None:
        self.plan = plan
        self.produce = produce
        self.emit = emit
        self.playback = playback  # the listener's playback as modelled here, in the playout ledger
        self.executor = executor
        self.pacing = pacing
        self.clock = clock
        self.drop_unsent = drop_unsent  # the adapter drops this reply's audio it has not sent yet
        self.figures = ReplyFigures()
        self._machine = Machine(TRANSITIONS, R.HELD if held else R.SPEAKING, "reply state")
        self._stop = threading.Event()  # the thread's side
        self._cut = asyncio.Event()  # the event side: cancelled or discarded
        self._released = asyncio.Event()
        if not held:
            self._released.set()
        self._playing = asyncio.Event()  # set unless paused
        self._playing.set()
        self.ended = asyncio.Event()  # run() has finished
        self._written: list[str] = []  # every word the LLM wrote
        self._started = clock()  # when it may speak
        self._heard_ms: float | None = None  # where the adapter said the listener stopped hearing it
        self.settled = False  # its end was said (``ReplyEnded``): where it stopped is fixed
        self._stream: ThreadStream[ReplyPiece] | None = None
        self._awaiting: str | None = None  # what the event side waits for: release, playing, piece

    @property
    def reply_id(self) -> str:
        return self.plan.reply_id

    @property
    def state(self) -> ReplyState:
        return self._machine.state

    @property
    def over(self) -> bool:
        return self._machine.done

    @property
    def idle(self) -> bool:
        """It has nothing to send right now: held, paused, waiting for the models' next piece (none
        has come yet), or over. (Waiting for room to send is the pacing's to say.)"""
        if self.over or self.state in (R.HELD, R.PAUSED) or self._awaiting in ("release", "playing"):
            return True
        stream = self._stream
        return self._awaiting == "piece" and stream is not None and not stream.pending

    # ---- control (event loop)

    def release(self, speech_end_at: float | None) -> None:
        """Say a held reply."""
        self._machine.move(R.SPEAKING)
        self.plan.speech_end_at = speech_end_at
        self._started = self.clock()
        self._released.set()

    def discard(self) -> None:
        """Drop a held reply unheard (its ``ReplyEnded`` says so at once)."""
        self._machine.move(R.DISCARDED)
        self._stop.set()
        self._cut.set()
        self._released.set()
        self._end()

    def cancel(self, reason: str, heard_ms: float | None = None) -> None:
        """Stop now (``turn_detected`` or ``client_cancelled``); ``run`` finishes the events. It keeps
        what was heard: up to ``heard_ms`` where the adapter says (a client's truncation), else what
        the play clock models. A held reply is discarded; one already over is left as it is."""
        if self.state is R.HELD:
            self.discard()
        elif self.state is R.CANCELLED and heard_ms is not None:
            self._heard_ms = heard_ms  # cut a moment ago, its events not finished: the client says where
        elif self.state in (R.SPEAKING, R.PAUSED):
            self._machine.move(R.CANCELLED)
            self.figures.reason = reason
            self._heard_ms = heard_ms
            self._stop.set()
            self._cut.set()
            self._playing.set()

    def pause(self, at_end: bool = False) -> bool:
        """Speech over the reply: stop its audio now, undoably (False: it is not speaking). A reply
        that has finished but still plays at the listener pauses its playback alone; ``at_end``:
        even though the model has it all played (the listener's player runs behind the model:
        speech at the reply's end, ``agent.interruption``)."""
        if self.state is R.SPEAKING:
            self._machine.move(R.PAUSED)
            self._playing.clear()
        elif (
            self.state is not R.DONE
            or not self.plan.audio
            or self.playback.paused
            or self.playback.clock.stopped
            or (not at_end and self.playback.played_ms() >= self.playback.sent_ms)
        ):
            return False
        self.emit(ReplyPaused(self.reply_id, self.playback.pause()))
        return True

    def resume(self, reason: str) -> None:
        """Not an interruption after all: play on from where it paused."""
        if self.state is R.PAUSED:
            self._machine.move(R.SPEAKING)
            self._playing.set()
        elif not self.playback.paused:
            return
        self.emit(ReplyResumed(self.reply_id, self.playback.resume(), reason))

    def played_ms(self) -> float:
        """Audio the listener has had time to play (sent, no more than real time since it began, and
        nothing past a pause)."""
        return self.playback.played_ms()

    # ---- the event side

    async def run(self) -> ReplyState:
        """Produce and say the reply; returns its final state."""
        stream: ThreadStream[ReplyPiece] = ThreadStream(
            lambda: self._counted(self.produce(self.plan.request, self._stop)), self.executor, self._stop
        )
        stream.start()
        self._stream = stream
        try:
            await self._await("release", self._released)
            if self.state is not R.DISCARDED:
                await self._say(stream)
            if not self.settled:
                self._end()
            return self.state
        finally:
            # the thread ends within one LLM delta or TTS piece; the next reply waits for it anyway
            await stream.close(wait_s=5.0)
            self.ended.set()

    async def _say(self, stream: ThreadStream[ReplyPiece]) -> None:
        self.emit(ReplyStarted(self.reply_id, self.playback))
        while self.state in (R.SPEAKING, R.PAUSED):
            await self._await("playing", self._playing)
            if self.state is not R.SPEAKING:
                break
            try:
                self._awaiting = "piece"
                piece = await stream.next(self._cut)
            except Exception as exc:  # the models failed: a failed reply; the session goes on
                self._awaiting = None
                if not self.over:
                    self._machine.move(R.FAILED)
                    self.figures.error = as_omnivox_error(exc)
                break
            self._awaiting = None
            if piece is None or self.over:  # (cut while the piece came)
                break
            await self._handle(piece)
        if self.state is R.SPEAKING:
            self._machine.move(R.DONE)

    async def _handle(self, piece: ReplyPiece) -> None:
        if isinstance(piece, FirstToken):
            self.figures.llm_ttft_s = piece.after_s
        elif isinstance(piece, ToolCallDelta):
            self.emit(ReplyCall(self.reply_id, piece))
        elif isinstance(piece, ToolRunning | ToolResult):
            self.emit(ReplyTool(self.reply_id, piece))
        elif isinstance(piece, Usage):
            self.figures.usage = piece
        elif isinstance(piece, ReplyFailed):
            self.figures.error = as_omnivox_error(piece.error)  # the apology that follows is the reply
        elif isinstance(piece, Word):
            self._written.append(piece.text)
            self.emit(ReplyText(self.reply_id, piece.text))
        elif isinstance(piece, Spoken):
            if piece.starts_sentence:
                index = self.playback.sentence(piece.text)
                self.emit(ReplySentence(self.reply_id, piece.text, index))
            await self._send_audio(piece.audio)

    async def _send_audio(self, audio: np.ndarray) -> None:
        frame = RATE * FRAME_MS // 1000
        sent = 0
        while sent < len(audio):
            n = await self.pacing.room(self.playback, min(frame, len(audio) - sent), self._cut)
            await self._await("playing", self._playing)
            if self.state is not R.SPEAKING:
                return
            piece = audio[sent : sent + max(n, 1)]
            sent += len(piece)
            if not self.playback.started:
                now = self.clock()
                self.figures.tts_ttfa_s = now - self._started
                self.figures.times.first_audio_sent, self.figures.times.speech_end = (
                    now,
                    self.plan.speech_end_at,
                )
                if self.plan.speech_end_at is not None:
                    self.figures.voice_to_voice_s = now - self.plan.speech_end_at
            ms = self.playback.send(piece, RATE)  # a truncation may name any of it from now on
            self.emit(ReplyAudio(self.reply_id, piece, ms))

    async def _await(self, what: str, event: asyncio.Event) -> None:
        if not event.is_set():
            self._awaiting = what
            try:
                await event.wait()
            finally:
                self._awaiting = None

    def _end(self) -> None:
        self.settled = True
        stopped_ms: float | None = None
        heard = self.playback.text
        if self.state is R.CANCELLED and self.plan.audio:
            self.playback.unsent(self.drop_unsent(self.reply_id))
            stopped_ms = self.playback.stop(self._heard_ms)
            heard = self.playback.heard_text(stopped_ms)
        written = "".join(self._written).strip()
        if not self.plan.audio:
            heard = written
        self.emit(ReplyEnded(self.reply_id, self.state, self.figures, written, heard, stopped_ms))

    # ---- the thread side

    def _counted(self, pieces: Iterator[ReplyPiece]) -> Iterator[ReplyPiece]:
        """The models' pieces, their synthesis time and audio counted as they are made."""
        times = self.figures.times
        for piece in pieces:
            if isinstance(piece, Spoken):
                self.figures.tts_busy_s += piece.synth_s
                self.figures.tts_audio_s += len(piece.audio) / RATE
                if times.tts_first_audio is None:  # the first words went to the TTS synth_s ago
                    times.tts_first_audio = self.clock()
                    times.first_words = times.tts_first_audio - piece.synth_s
            elif isinstance(piece, FirstToken) and times.llm_first_token is None:
                times.llm_first_token = self.clock()
            yield piece
