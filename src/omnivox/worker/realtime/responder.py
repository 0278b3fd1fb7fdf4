"""One realtime response: LLM -> whole words -> sentences -> TTS, paced out as audio deltas.

A thread (the session's output thread) runs the blocking part: the LLM stream, re-chunked into words
and sentences, each sentence synthesised as soon as it is complete. The event loop side turns what
the thread produces into events and paces the audio: at most ``lead_ms`` ahead of real time, so an
interruption leaves little stale audio in the client.

``cancel`` stops both sides at once: the thread at its next check (between LLM deltas and TTS
pieces), the event side immediately. Unsent audio is dropped from the outbox, and the assistant item
keeps only the words the user heard: whole sentences played, plus the played share of the sentence
that was cut.

A response can start *held* (speculatively, while the user's pause may still turn into more
speech): the thread already runs the LLM and the TTS, but nothing is said until ``release``; a
``discard`` ends it without a single event.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from omnivox.core.errors import OmnivoxError, as_omnivox_error
from omnivox.protocol import realtime as rt
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import approx_tokens, history_tokens
from omnivox.voice.llm.words import WordChunker
from omnivox.voice.stack import VoiceStack
from omnivox.voice.tts.base import SentenceChunker
from omnivox.worker.realtime.audio_io import TTS_RATE, OutputEncoder
from omnivox.worker.realtime.conversation import Item
from omnivox.worker.realtime.outbox import Outbox

FRAME_MS = 100  # audio per delta


@dataclass
class ResponsePlan:
    response_id: str
    item: Item  # the assistant item this response fills
    audio: bool  # speak (else text only)
    voice: str
    speed: float
    messages: list[ChatMessage]
    llm: LlmParams
    in_conversation: bool = True  # False: an out-of-band response ("conversation": "none")
    previous_item_id: str | None = None  # the item before ``item`` in the conversation
    metadata: dict[str, str] | None = None
    speech_end_at: float | None = None  # monotonic time the user's speech ended, if it prompted this


@dataclass
class Outcome:
    status: str = "completed"  # completed | cancelled | failed | incomplete
    reason: str | None = None
    error: OmnivoxError | None = None
    llm_ttft_s: float | None = None
    tts_ttfa_s: float | None = None
    voice_to_voice_s: float | None = None


class Responder:
    def __init__(
        self,
        plan: ResponsePlan,
        stack: VoiceStack,
        outbox: Outbox,
        encoder: OutputEncoder,
        executor: Executor,
        lead_ms: float,
        held: bool = False,
    ) -> None:
        self.plan = plan
        self.stack = stack
        self.outbox = outbox
        self.encoder = encoder
        self.executor = executor
        self.lead_ms = lead_ms
        self.outcome = Outcome()
        self._stop = threading.Event()
        self._cancelled = asyncio.Event()
        self._text: list[str] = []
        self._sent_ms = 0.0
        self._first_audio_at: float | None = None
        self._created = self._started = time.monotonic()  # started: when it may speak
        self.tts_busy_s = 0.0  # synthesis time (output thread) and the audio it made
        self.tts_audio_s = 0.0
        self._released = asyncio.Event()
        self._discarded = False
        if not held:
            self._released.set()

    @property
    def response_id(self) -> str:
        return self.plan.response_id

    def cancel(self, reason: str) -> None:
        """Stop now (``turn_detected`` or ``client_cancelled``); ``run`` finishes the events."""
        if not self._released.is_set():
            self.discard()  # never said: nothing to finish
            return
        if self.outcome.status == "completed" and not self._cancelled.is_set():
            self.outcome.status, self.outcome.reason = "cancelled", reason
        self._stop.set()
        self._cancelled.set()

    def release(self, previous_item_id: str | None, speech_end_at: float | None) -> None:
        """Say a held response: its item follows ``previous_item_id`` in the conversation."""
        self.plan.previous_item_id = previous_item_id
        self.plan.speech_end_at = speech_end_at
        self._started = time.monotonic()
        self._released.set()

    def discard(self) -> None:
        """Drop a held response unheard: no events at all."""
        self._discarded = True
        self._stop.set()
        self._released.set()

    def played_ms(self) -> float:
        """Audio the client has had time to play (sent, and no more than real time since it began)."""
        if self._first_audio_at is None:
            return 0.0
        return min(self._sent_ms, (time.monotonic() - self._first_audio_at) * 1000)

    # ---- the event side

    async def run(self) -> Outcome:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def put(kind: str, value: Any = None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        produced = loop.run_in_executor(self.executor, self._produce, put)
        await self._released.wait()
        if self._discarded:
            self.outcome.status = "discarded"
            await asyncio.wait({produced}, timeout=5.0)
            return self.outcome
        self._begin()
        try:
            while not self._cancelled.is_set():
                kind, value = await self._next(queue)
                if kind == "end":
                    break
                if kind == "error":
                    self.outcome.status, self.outcome.error = "failed", as_omnivox_error(value)
                    break
                await self._handle(kind, value)
        finally:
            self._stop.set()
        self._finish()
        # the thread ends within one LLM delta or TTS piece; the next response waits for it anyway
        await asyncio.wait({produced}, timeout=5.0)
        return self.outcome

    async def _next(self, queue: asyncio.Queue[tuple[str, Any]]) -> tuple[str, Any]:
        get = asyncio.ensure_future(queue.get())
        stop = asyncio.ensure_future(self._cancelled.wait())
        await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if get.done():
            return get.result()
        get.cancel()
        return "cancelled", None

    async def _handle(self, kind: str, value: Any) -> None:
        p = self.plan
        if kind == "llm_ttft":
            self.outcome.llm_ttft_s = value
        elif kind == "text":
            self._text.append(value)
            self.outbox.put(rt.TextDelta(response_id=p.response_id, item_id=p.item.id, delta=value))
        elif kind == "sentence":
            delta = value if not p.item.spans else " " + value
            p.item.spans.append((self._sent_ms, value))
            self.outbox.put(
                rt.AudioTranscriptDelta(response_id=p.response_id, item_id=p.item.id, delta=delta)
            )
        elif kind == "audio":
            await self._send_audio(value)

    async def _send_audio(self, audio: np.ndarray) -> None:
        frame = TTS_RATE * FRAME_MS // 1000
        for i in range(0, len(audio), frame):
            piece = audio[i : i + frame]
            await self._pace()
            if self._cancelled.is_set():
                return
            now = time.monotonic()
            if self._first_audio_at is None:
                self._first_audio_at = now
                self.outcome.tts_ttfa_s = now - self._started
                if self.plan.speech_end_at is not None:
                    self.outcome.voice_to_voice_s = now - self.plan.speech_end_at
            ms = len(piece) * 1000 / TTS_RATE
            delta = rt.AudioDelta(
                response_id=self.response_id, item_id=self.plan.item.id, delta=self.encoder.encode(piece)
            )
            self.outbox.put(delta, response_id=self.response_id, audio_ms=ms)
            self._sent_ms += ms

    async def _pace(self) -> None:
        """Wait until sending more keeps the client's buffer within ``lead_ms``."""
        if self._first_audio_at is None:
            return
        ahead = self._sent_ms - (time.monotonic() - self._first_audio_at) * 1000
        wait_s = (ahead - self.lead_ms) / 1000
        if wait_s > 0:
            try:
                await asyncio.wait_for(self._cancelled.wait(), wait_s)
            except TimeoutError:
                pass

    def _begin(self) -> None:
        p = self.plan
        item = p.item
        item.status = "in_progress"
        response = self._response("in_progress")
        self.outbox.put(rt.ResponseCreated(response=response))
        self.outbox.put(rt.OutputItemAdded(response_id=p.response_id, item=item.wire()))
        if p.in_conversation:
            self.outbox.put(rt.ItemAdded(previous_item_id=p.previous_item_id, item=item.wire()))
        part = {"type": "audio", "transcript": ""} if p.audio else {"type": "text", "text": ""}
        self.outbox.put(rt.ContentPartAdded(response_id=p.response_id, item_id=item.id, part=part))

    def _finish(self) -> None:
        p, item, outcome = self.plan, self.plan.item, self.outcome
        if p.audio:
            self._sent_ms -= self.outbox.drop_audio(p.response_id) if outcome.status == "cancelled" else 0.0
            item.audio_ms = self._sent_ms
            item.text = " ".join(text for _, text in item.spans)
            if outcome.status == "cancelled":
                self.encoder.flush()  # the rest of this response's audio is never sent
                heard_ms = self.played_ms()
                item.truncate(heard_ms)
                self.outbox.put(rt.ItemTruncated(item_id=item.id, audio_end_ms=int(heard_ms)))
            elif tail := self.encoder.flush():
                self.outbox.put(rt.AudioDelta(response_id=p.response_id, item_id=item.id, delta=tail))
            self.outbox.put(rt.AudioDone(response_id=p.response_id, item_id=item.id))
            self.outbox.put(
                rt.AudioTranscriptDone(response_id=p.response_id, item_id=item.id, transcript=item.text)
            )
            part = {"type": "audio", "transcript": item.text}
        else:
            item.text = "".join(self._text).strip()
            self.outbox.put(rt.TextDone(response_id=p.response_id, item_id=item.id, text=item.text))
            part = {"type": "text", "text": item.text}
        item.status = "completed" if outcome.status == "completed" else "incomplete"
        self.outbox.put(rt.ContentPartDone(response_id=p.response_id, item_id=item.id, part=part))
        self.outbox.put(rt.OutputItemDone(response_id=p.response_id, item=item.wire()))
        if p.in_conversation:
            self.outbox.put(rt.ItemDone(previous_item_id=p.previous_item_id, item=item.wire()))
        self.outbox.put(rt.ResponseDone(response=self._response(outcome.status)))

    def _response(self, status: str) -> dict[str, Any]:
        p, outcome = self.plan, self.outcome
        response: dict[str, Any] = {
            "id": p.response_id,
            "object": "realtime.response",
            "status": status,
            "conversation_id": "conv_default" if p.in_conversation else None,
            "output_modalities": ["audio"] if p.audio else ["text"],
            "audio": {"output": {"voice": p.voice}},
            "max_output_tokens": p.llm.max_tokens or "inf",
            "metadata": p.metadata,
            "output": [p.item.wire()] if status != "in_progress" else [],
        }
        if status in ("cancelled", "failed", "incomplete"):
            details: dict[str, Any] = {"type": status, "reason": outcome.reason}
            if outcome.error is not None:
                details["error"] = {
                    "type": "server_error",
                    "code": outcome.error.wire_code,
                    "message": outcome.error.message,
                }
            response["status_details"] = details
        if status != "in_progress":
            input_tokens = history_tokens(p.messages)
            output_tokens = approx_tokens(p.item.text)
            response["usage"] = {
                "total_tokens": input_tokens + output_tokens,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "input_token_details": {"text_tokens": input_tokens, "audio_tokens": 0, "cached_tokens": 0},
                "output_token_details": {"text_tokens": output_tokens, "audio_tokens": 0},
            }
        return response

    # ---- the thread side

    def _produce(self, put: Callable[..., None]) -> None:
        p, stop = self.plan, self._stop
        words = WordChunker()
        sentences = SentenceChunker()
        first = True
        try:
            for delta in self.stack.llm.stream(p.messages, p.llm, stop):
                if first:
                    put("llm_ttft", time.monotonic() - self._created)
                    first = False
                self._words(words.push(delta), sentences, put)
                if stop.is_set():
                    return
            self._words(words.flush(), sentences, put)
            if p.audio and not stop.is_set():
                for sentence in sentences.flush():
                    self._speak(sentence, put)
            put("end")
        except BaseException as exc:  # reported as a failed response; the session goes on
            put("error", exc)

    def _words(self, batch: list[str], sentences: SentenceChunker, put: Callable[..., None]) -> None:
        for word in batch:
            if self._stop.is_set():
                return
            if not self.plan.audio:
                put("text", word)
                continue
            for sentence in sentences.push(word):
                self._speak(sentence, put)

    def _speak(self, sentence: str, put: Callable[..., None]) -> None:
        said = False
        began = time.monotonic()
        for chunk in self.stack.tts.speak(
            sentence, voice=self.plan.voice, stop=self._stop, speed=self.plan.speed
        ):
            self.tts_busy_s += time.monotonic() - began
            self.tts_audio_s += len(chunk.audio) / TTS_RATE
            if not said:
                put("sentence", chunk.text)
                said = True
            put("audio", chunk.audio)
            began = time.monotonic()
