"""One realtime response: the engine's reply (LLM -> words -> sentences -> TTS) paced out as events.

A response's life is an explicit state machine (``ResponseState``):

    HELD ──release──> SPEAKING ──> DONE | CANCELLED | FAILED
      │                 │  ^
      │            pause│  │resume
      │                 v  │
      │                PAUSED ──> CANCELLED | FAILED
      └───discard───> DISCARDED

A response prepared during the user's pause starts HELD: the engine already writes and speaks it in
the output thread, but nothing is said until ``release``; ``discard`` ends it without a single event.
Any other response starts SPEAKING. ``cancel`` (a barge-in, or the client) stops both sides at once:
the thread at its next check, the event side immediately; unsent audio is dropped from the outbox
and the assistant item keeps only the words the user heard (whole sentences played, plus the played
share of the sentence that was cut).

``pause`` (speech over the reply, not yet judged) stops its audio at once without ending it: no
more deltas go out (the engine goes on writing), ``omnivox.interruption.paused`` says where it
stopped, and playback is modelled as stopped there. ``resume`` plays on from that point
(``omnivox.interruption.resumed``): nothing was truncated and the client gets every sample once.
``cancel`` from a pause truncates the item to where it paused. A client that knows nothing of the
extension sees a reply whose audio stalls a moment, and ``response.done`` only at its real end.

Audio is paced at most ``lead_ms`` ahead of real time, so an interruption leaves little stale audio
in the client. A response's output items open as they begin: the message (text or audio) at its
first word, each function call (``calls``) at its first piece; a response that only calls functions
has no message item, one that says nothing at all has an empty one. The thread hands the event
side typed pieces (``voice.reply``), then ``_End`` or ``_Failed``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from omnivox.agent.playout import Playback
from omnivox.core.errors import as_omnivox_error
from omnivox.core.transitions import Machine
from omnivox.protocol.realtime import events as ev
from omnivox.voice.llm.base import ToolCallDelta, Usage
from omnivox.voice.reply import FirstToken, ReplyFailed, ReplyPiece, ReplyRequest, Spoken, Word
from omnivox.worker.realtime.audio_io import TTS_RATE, OutputEncoder
from omnivox.worker.realtime.calls import ResponseCalls
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.response_wire import Figures, ResponsePlan, response_object
from omnivox.worker.realtime.usage import rate_limits

FRAME_MS = 100  # audio per delta


class ResponseState(StrEnum):
    HELD = "held"  # prepared during the user's pause; nothing said yet
    SPEAKING = "speaking"  # its events and audio are going out
    PAUSED = "paused"  # speech over it: no audio goes out until it resumes or is cancelled
    DONE = "done"  # said to the end
    CANCELLED = "cancelled"  # cut short (barge-in, client)
    FAILED = "failed"  # the engine failed
    DISCARDED = "discarded"  # a held response dropped unheard (no events at all)


R = ResponseState
TRANSITIONS: dict[ResponseState, frozenset[ResponseState]] = {
    R.HELD: frozenset({R.SPEAKING, R.DISCARDED}),
    R.SPEAKING: frozenset({R.PAUSED, R.DONE, R.CANCELLED, R.FAILED}),
    R.PAUSED: frozenset({R.SPEAKING, R.CANCELLED, R.FAILED}),
    R.DONE: frozenset(),
    R.CANCELLED: frozenset(),
    R.FAILED: frozenset(),
    R.DISCARDED: frozenset(),
}
WIRE_STATUS = {R.DONE: "completed", R.CANCELLED: "cancelled", R.FAILED: "failed"}


@dataclass(frozen=True)
class _End:
    pass


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_Produced = ReplyPiece | _End | _Failed


Produce = Callable[[ReplyRequest, threading.Event], Iterator[ReplyPiece]]


class Response:
    def __init__(
        self,
        plan: ResponsePlan,
        produce: Produce,
        events: Events,
        conversation: Conversation,
        encoder: OutputEncoder,
        executor: Executor,
        lead_ms: float,
        held: bool = False,
        clock: Callable[[], float] = time.monotonic,
        playback: Playback | None = None,
    ) -> None:
        self.plan = plan
        self.clock = clock
        self.produce = produce
        self.events = events
        self.conversation = conversation
        self.encoder = encoder
        self.executor = executor
        self.lead_ms = lead_ms
        self.figures = Figures()
        self._machine = Machine(TRANSITIONS, R.HELD if held else R.SPEAKING, "response state")
        self._stop = threading.Event()  # the thread's side
        self._cut = asyncio.Event()  # the event side: cancelled or discarded
        self._released = asyncio.Event()
        if not held:
            self._released.set()
        self._playing = asyncio.Event()  # set unless paused
        self._playing.set()
        self.ended = asyncio.Event()  # run() has finished
        self._text: list[str] = []
        self._outputs: list[Item] = []  # output items in the order they opened
        self._message_index: int | None = None  # the message item's output index, once open
        self._usage: Usage | None = None  # the LLM's own token counts, if it reported them
        self.calls = ResponseCalls(
            plan.response_id, events, conversation if plan.in_conversation else None, self._output_index
        )
        # the client's playback as modelled here, in the session's playout ledger
        self.playback = playback if playback is not None else Playback(clock)
        if plan.audio:
            plan.item.playback = self.playback  # the item's words are what of it was heard
        self._started = clock()  # when it may speak
        self._heard_ms: float | None = None  # where a client's truncation cut it

    @property
    def response_id(self) -> str:
        return self.plan.response_id

    @property
    def state(self) -> ResponseState:
        return self._machine.state

    @property
    def over(self) -> bool:
        return self._machine.done

    # ---- control (event loop)

    def release(self, speech_end_at: float | None) -> None:
        """Say a held response (its item is already in the conversation)."""
        self._machine.move(R.SPEAKING)
        self.plan.speech_end_at = speech_end_at
        self._started = self.clock()
        self._released.set()

    def discard(self) -> None:
        """Drop a held response unheard: no events at all."""
        self._machine.move(R.DISCARDED)
        self._stop.set()
        self._cut.set()
        self._released.set()

    def cancel(self, reason: str, heard_ms: float | None = None) -> None:
        """Stop now (``turn_detected`` or ``client_cancelled``); ``run`` finishes the events. The
        item keeps what was heard: up to ``heard_ms`` where the client said (its truncation), else
        what the play clock models. A held response is discarded; one already over is left as it is."""
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

    def pause(self) -> bool:
        """Speech over the reply: stop its audio now, undoably (False: it is not speaking). A reply
        that has finished but still plays at the client pauses its playback alone."""
        if self.state is R.SPEAKING:
            self._machine.move(R.PAUSED)
            self._playing.clear()
        elif (
            self.state is not R.DONE
            or not self.plan.audio
            or self.playback.paused
            or self.playback.played_ms() >= self.playback.sent_ms
        ):
            return False
        ms = self.playback.pause()
        self.events.put(
            ev.InterruptionPaused(
                response_id=self.response_id, item_id=self.plan.item.id, audio_end_ms=int(ms)
            )
        )
        return True

    def resume(self, reason: str) -> None:
        """Not an interruption after all: play on from where it paused."""
        if self.state is R.PAUSED:
            self._machine.move(R.SPEAKING)
            self._playing.set()
        elif not self.playback.paused:
            return
        ms = self.playback.resume()
        self.events.put(
            ev.InterruptionResumed(
                response_id=self.response_id, item_id=self.plan.item.id, audio_start_ms=int(ms), reason=reason
            )
        )

    def played_ms(self) -> float:
        """Audio the client has had time to play (sent, no more than real time since it began, and
        nothing past a pause)."""
        return self.playback.played_ms()

    # ---- the event side

    async def run(self) -> ResponseState:
        """Produce and say the response; returns its final state."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Produced] = asyncio.Queue()

        def put(item: _Produced) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        produced = loop.run_in_executor(self.executor, self._produce, put)
        try:
            await self._released.wait()
            if self.state is R.DISCARDED:
                return self.state
            self._begin()
            while self.state in (R.SPEAKING, R.PAUSED):
                await self._playing.wait()
                if self.state is not R.SPEAKING:
                    break
                item = await self._next(queue)
                if item is None or isinstance(item, _End):
                    break
                if isinstance(item, _Failed):
                    self._machine.move(R.FAILED)
                    self.figures.error = as_omnivox_error(item.error)
                    break
                await self._handle(item)
            if self.state is R.SPEAKING:
                self._machine.move(R.DONE)
            self._finish()
            return self.state
        finally:
            self._stop.set()
            # the thread ends within one LLM delta or TTS piece; the next response waits for it anyway
            await asyncio.wait({produced}, timeout=5.0)
            self.ended.set()

    async def _next(self, queue: asyncio.Queue[_Produced]) -> _Produced | None:
        """The next piece from the thread, or None once the response is cut."""
        get = asyncio.ensure_future(queue.get())
        cut = asyncio.ensure_future(self._cut.wait())
        await asyncio.wait({get, cut}, return_when=asyncio.FIRST_COMPLETED)
        cut.cancel()
        if get.done():
            return get.result()
        get.cancel()
        return None

    async def _handle(self, piece: ReplyPiece) -> None:
        p = self.plan
        if isinstance(piece, FirstToken):
            self.figures.llm_ttft_s = piece.after_s
        elif isinstance(piece, ToolCallDelta):
            self.calls.piece(piece)
        elif isinstance(piece, Usage):
            self._usage = piece
        elif isinstance(piece, ReplyFailed):
            self.figures.error = as_omnivox_error(piece.error)  # the apology that follows is the reply
        elif isinstance(piece, Word):
            if not p.audio and (piece.text.strip() or self._message_index is not None):
                self._open_message()
                self._text.append(piece.text)
                self.events.put(ev.TextDelta(delta=piece.text, **self._where()))
        elif isinstance(piece, Spoken):
            self._open_message()
            if piece.starts_sentence:
                first = self.playback.sentence(piece.text) == 0
                delta = piece.text if first else " " + piece.text
                self.events.put(ev.AudioTranscriptDelta(delta=delta, **self._where()))
            await self._send_audio(piece.audio)

    def _where(self) -> dict[str, Any]:
        """The message item's place (for its content events)."""
        return {
            "response_id": self.plan.response_id,
            "item_id": self.plan.item.id,
            "output_index": self._message_index or 0,
        }

    def _output_index(self, item: Item) -> int:
        self._outputs.append(item)
        return len(self._outputs) - 1

    def _open_message(self) -> None:
        """The message item begins (at the first word or sound; at the end of a reply that had none)."""
        if self._message_index is not None:
            return
        p = self.plan
        item = p.item
        item.status = "in_progress"
        self._message_index = self._output_index(item)
        self.events.put(
            ev.OutputItemAdded(response_id=p.response_id, output_index=self._message_index, item=item.wire())
        )
        if p.in_conversation:
            self.conversation.add(item)
            self.conversation.opened(item)
        part = {"type": "audio", "transcript": ""} if p.audio else {"type": "text", "text": ""}
        self.events.put(ev.ContentPartAdded(part=part, **self._where()))

    async def _send_audio(self, audio: np.ndarray) -> None:
        frame = TTS_RATE * FRAME_MS // 1000
        for i in range(0, len(audio), frame):
            piece = audio[i : i + frame]
            await self._pace()
            await self._playing.wait()
            if self.state is not R.SPEAKING:
                return
            if not self.playback.started:
                now = self.clock()
                self.figures.tts_ttfa_s = now - self._started
                if self.plan.speech_end_at is not None:
                    self.figures.voice_to_voice_s = now - self.plan.speech_end_at
            delta = ev.AudioDelta(delta=self.encoder.encode(piece), **self._where())
            # a truncation may name any of it from now on
            ms = self.playback.send(piece, TTS_RATE)
            self.events.put(delta, response_id=self.response_id, audio_ms=ms)

    async def _pace(self) -> None:
        """Wait until sending more keeps the client's buffer within ``lead_ms``."""
        if not self.playback.started:
            return
        ahead = self.playback.ahead_ms()
        wait_s = (ahead - self.lead_ms) / 1000
        if wait_s > 0:
            try:
                await asyncio.wait_for(self._cut.wait(), wait_s)
            except TimeoutError:
                pass

    def _begin(self) -> None:
        p = self.plan
        p.item.status = "in_progress"
        self.events.put(ev.ResponseCreated(response=self._response("in_progress")))
        self.events.put(rate_limits(p.request, p.context_tokens))

    def _finish(self) -> None:
        p, item = self.plan, self.plan.item
        cancelled = self.state is R.CANCELLED
        if self._message_index is None and not self.calls:
            self._open_message()  # a reply that said nothing is still a (empty) message
        if self._message_index is not None:
            self._finish_message(cancelled)
        elif p.audio and cancelled:
            self.encoder.flush()
        self.calls.finish(completed=self.state is R.DONE)
        item.status = "completed" if self.state is R.DONE else "incomplete"
        self.events.put(ev.ResponseDone(response=self._response(WIRE_STATUS[self.state])))

    def _finish_message(self, cancelled: bool) -> None:
        p, item, where = self.plan, self.plan.item, self._where()
        if p.audio:
            if cancelled:
                self.playback.unsent(self.events.drop_audio(p.response_id))
            item.text = self.playback.text
            if cancelled:
                self.encoder.flush()  # the rest of this response's audio is never sent
                self.conversation.truncate(item, self.playback.stop(self._heard_ms))
            elif tail := self.encoder.flush():
                self.events.put(ev.AudioDelta(delta=tail, **where))
            self.events.put(ev.AudioDone(**where))
            self.events.put(ev.AudioTranscriptDone(transcript=item.text, **where))
            part = {"type": "audio", "transcript": item.text}
        else:
            item.text = "".join(self._text).strip()
            self.events.put(ev.TextDone(text=item.text, **where))
            part = {"type": "text", "text": item.text}
        item.status = "completed" if self.state is R.DONE else "incomplete"
        self.events.put(ev.ContentPartDone(part=part, **where))
        self.events.put(
            ev.OutputItemDone(response_id=p.response_id, output_index=where["output_index"], item=item.wire())
        )
        if p.in_conversation:
            self.conversation.closed(item)

    def _response(self, status: str) -> dict[str, Any]:
        return response_object(
            self.plan, self.figures, status, self._outputs, self.playback.sent_ms, self._usage
        )

    # ---- the thread side

    def _produce(self, put: Callable[[_Produced], None]) -> None:
        try:
            for piece in self.produce(self.plan.request, self._stop):
                if isinstance(piece, Spoken):
                    self.figures.tts_busy_s += piece.synth_s
                    self.figures.tts_audio_s += len(piece.audio) / TTS_RATE
                put(piece)
            put(_End())
        except BaseException as exc:  # reported as a failed response; the session goes on
            put(_Failed(exc))
