"""The cascade engine's full-duplex mode: VAD + ASR hear every unit, LLM + TTS answer in unit-sized
pieces, and speech over the reply is a barge-in.

Per unit (``engines.duplex``): ``prefill`` hands the chunk to the session's hearing thread (VAD and
streaming ASR through a ``Listener``, server-VAD turn detection) and returns at once, so a unit costs
milliseconds however long recognition takes; ``generate`` reads what has been heard since:

- the user's turn ended (``final`` with words): the reply starts on its own thread (``voice.reply``:
  LLM -> words -> sentences -> TTS), its audio gathered as the TTS makes it;
- while a reply has audio, each unit says up to one unit of it (``chunk_ms``), with the text of each
  sentence alongside its first audio; the unit that empties a finished reply ends the turn;
- speech over the reply follows the realtime session's rules (``voice.turn.interruption``): once it
  holds (``speech_confirmed``) the reply pauses (units listen; what they would have said is kept);
  words other than a backchannel or the assistant's own cut it (that unit listens and says
  ``end_of_turn``; the history keeps what was said); a cough or noise (no words within
  ``resume_ms``), a backchannel or its own echo resume it where it paused, and make no turn.
- the assistant's own voice coming back through the user's speaker is gated out before the VAD
  (``voice.echo.gate``). The reference is in stream time: the audio a unit says plays while the
  client records the next unit's chunk (it cannot play before it arrives), so each chunk is heard
  against the audio of the unit before it, at any pace.

In omni mode the latest frame goes to the LLM with the user's words when the LLM sees images;
otherwise frames are not used and ``prepared`` says so.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from omnivox.audio.resample import resample
from omnivox.engines.duplex import DuplexParams, DuplexUnit
from omnivox.protocol.chat import ChatMessage, ImagePart, TextPart
from omnivox.video.frames import encode_jpeg
from omnivox.voice.echo.gate import EchoGate
from omnivox.voice.listener import Heard, Listener
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import trim_history
from omnivox.voice.reply import ReplyPiece, ReplyRequest, Spoken, Word, produce_reply
from omnivox.voice.stack import ASR_RATE, VoiceStack
from omnivox.voice.turn.interruption import Cut, Decision, Interruption, Pause, Resume, Verdict
from omnivox.voice.vad.turn import TurnParams

Speak = Callable[[ReplyRequest, threading.Event], Iterator[ReplyPiece]]

log = logging.getLogger(__name__)

OUTPUT_RATE = 24000
CONFIRM_MS = 150  # voiced audio before speech over the reply counts as a barge-in
# How long a unit's generate may wait for the hearing thread to catch up with the unit's audio and
# for a reply that has just started to have its first audio: a reply that is ready in time is spoken
# in the unit that heard the end of the turn, not one unit (a second) later.
SETTLE_MS = 120
_STOP = object()
_PEEK = object()  # asks the hearing thread for the words of the utterance so far


@dataclass(frozen=True)
class _Peeked:
    text: str


@dataclass
class _Reply:
    """One reply being made on its thread; its audio is taken by units as it comes."""

    stop: threading.Event = field(default_factory=threading.Event)
    pieces: deque[tuple[np.ndarray, str]] = field(default_factory=deque)  # (audio, sentence text)
    words: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # sentences whose audio went out
    finished: bool = False  # the producer ended (all its audio is in ``pieces``)
    failed: BaseException | None = None
    thread: threading.Thread | None = None


class CascadeDuplex:
    """One duplex session on a loaded ``VoiceStack`` (not thread-safe: the engine thread drives it)."""

    def __init__(
        self,
        stack: VoiceStack,
        params: DuplexParams,
        voice: str,
        turn: TurnParams,
        speak: Speak | None = None,
    ) -> None:
        self.stack = stack
        # how a reply is produced: the stack's own LLM and TTS, or a staged pipeline's
        self.speak: Speak = speak or (
            lambda request, stop: produce_reply(stack.llm, stack.tts, request, stop)
        )
        self.params = params
        self.voice = voice
        # the ASR is flushed early in a pause (at 60% of the silence that ends a turn), so the final
        # transcript, when the turn ends, costs little and the reply can start in that same unit
        self.listener = Listener(stack.vad, stack.asr, turn, CONFIRM_MS, speculate_at=0.6, echo=EchoGate())
        self.interruption = Interruption()  # speech over the reply: pause, then cut or resume
        self.paused = False  # the reply is paused for speech over it
        self.resumed: list[str] = []  # why each pause resumed (no_words, backchannel, echo)
        self._said_next = np.zeros(0, np.float32)  # 16 kHz: plays while the next chunk is recorded
        self._peeking = False  # the hearing thread is decoding the words so far for an expired pause
        self._heard_ms = 0.0  # audio time the hearing thread has reached
        self._recent = ""  # the last words of the reply that ended last
        self.history: list[ChatMessage] = []
        if params.system_prompt or stack.system_prompt:
            self.history.append(
                ChatMessage(role="system", content=params.system_prompt or stack.system_prompt)
            )
        self.reply: _Reply | None = None
        self.latest_frame: np.ndarray | None = None
        self._heard: queue.SimpleQueue[Heard | _Peeked] = queue.SimpleQueue()
        self._audio: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._progress = threading.Condition()  # the hearing thread finished a chunk; a reply has audio
        self._fed = 0  # chunks handed to the hearing thread
        self._done = 0  # chunks it has heard
        self._speaking = False  # the user was speaking at the end of the audio heard so far
        self._hearing = threading.Thread(target=self._hear, name="duplex-hearing", daemon=True)
        self._hearing.start()
        self._interrupted = False

    @property
    def sees(self) -> bool:
        return self.params.mode == "omni" and self.stack.llm.vision

    # ---- the unit

    def prefill(self, audio: np.ndarray, frames: list[np.ndarray]) -> None:
        self._fed += 1
        reference = np.zeros(len(audio), np.float32)  # what played while this chunk was recorded
        n = min(len(audio), len(self._said_next))
        reference[:n] = self._said_next[:n]
        self._said_next = self._said_next[n:]
        self._audio.put((audio, reference))
        if frames and self.sees:
            self.latest_frame = frames[-1]

    def generate(self, force_listen: bool) -> DuplexUnit:
        deadline = time.monotonic() + SETTLE_MS / 1000
        with self._progress:
            if self._speaking:  # the turn may end in this unit: let hearing catch up (bounded)
                left = max(0.0, deadline - time.monotonic())
                self._progress.wait_for(lambda: self._done >= self._fed, left)
        started = self._take_heard()
        if started is not None and not force_listen:
            with self._progress:  # a reply that starts now may have its first audio at once
                self._progress.wait_for(
                    lambda: bool(started.pieces) or started.finished, max(0.0, deadline - time.monotonic())
                )
        if self._interrupted:
            self._interrupted = False
            return DuplexUnit(is_listen=True, end_of_turn=True)
        reply = self.reply
        if reply is None or force_listen or self.paused:
            return DuplexUnit(is_listen=True)
        want = self.params.chunk_ms * OUTPUT_RATE // 1000
        audio, text = self._take(reply, want)
        if len(audio):
            self._said_next = np.concatenate([self._said_next, resample(audio, OUTPUT_RATE, ASR_RATE)])
        done = reply.finished and not reply.pieces
        if done:
            self._end_reply(reply)
        if not len(audio):
            return DuplexUnit(is_listen=True, end_of_turn=done and bool(reply.said))
        return DuplexUnit(is_listen=False, text=text, audio=audio, end_of_turn=done, tokens=len(text.split()))

    def wait_heard(self, timeout: float = 10.0) -> bool:
        """Until the hearing thread has heard every chunk handed to it (units faster than real time)."""
        with self._progress:
            return self._progress.wait_for(lambda: self._done >= self._fed, timeout)

    def finalize(self) -> None:
        pass  # nothing to trim: the LLM's history is trimmed when a reply starts

    def close(self) -> None:
        if self.reply is not None:
            self._end_reply(self.reply)
        self._audio.put(_STOP)
        self._hearing.join(timeout=5)

    # ---- hearing (its own thread)

    def _hear(self) -> None:
        while (item := self._audio.get()) is not _STOP:
            try:
                if item is _PEEK:  # the pause has run out: the words so far settle it
                    self._heard.put(_Peeked(self.listener.peek()))
                    continue
                audio, reference = item  # type: ignore[misc]
                for event in self.listener.feed(audio, reference):
                    self._heard.put(event)
            except Exception:
                log.exception("duplex hearing failed")
            finally:
                with self._progress:
                    self._done += 1
                    self._speaking = self.listener.speaking
                    self._heard_ms = self.listener.audio_ms
                    self._progress.notify_all()

    def _take_heard(self) -> _Reply | None:
        """Act on what was heard; returns the reply this started, if one."""
        started: _Reply | None = None
        while True:
            try:
                event = self._heard.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, _Peeked):
                self._peeking = False
                if self._act(self.interruption.expired(event.text, self._heard_ms, self._spoken())):
                    started = None
            elif self._judge(event):
                started = None  # a barge-in
            elif event.kind == "final":
                verdict = self.interruption.turn_ended()
                # a backchannel, a cough or its own echo over the reply is not the user's turn
                if event.text.strip() and verdict in (None, Verdict.WORDS):
                    started = self._start_reply(event.text.strip())
        if self.interruption.due(self._heard_ms) and not self._peeking:
            self._peeking = True  # decoded on the hearing thread, in order with the audio
            self._audio.put(_PEEK)
        return started

    def _judge(self, event: Heard) -> bool:
        """Speech over the reply (``voice.turn.interruption``); True when it cut the reply."""
        judge, speaking = self.interruption, self._reply_speaking()
        if event.kind == "speech_started":
            judge.speech_started(event.audio_ms)
            return False
        if event.kind == "speech_confirmed":
            return self._act(judge.confirmed(event.audio_ms, speaking))
        if event.kind == "resumed":
            return self._act(judge.speaks_on(event.audio_ms, speaking))
        if event.kind in ("partial", "pause", "final"):
            settled = event.kind != "partial"
            return self._act(judge.heard(event.text, event.audio_ms, self._spoken(), settled))
        return False

    def _act(self, decision: Decision | None) -> bool:
        if isinstance(decision, Pause):
            self.paused = True
        elif isinstance(decision, Resume):
            self.paused = False
            self.resumed.append(decision.reason.value)
            log.info("duplex: resumed (%s)", decision.reason.value)
        elif isinstance(decision, Cut):
            self.paused = False
            if self.reply is not None:
                self._end_reply(self.reply)  # barge-in
                self._interrupted = True
            return True
        return False

    def _reply_speaking(self) -> bool:
        """A reply is under way: being said, or still to be (its audio comes)."""
        reply = self.reply
        return reply is not None and (bool(reply.pieces) or not reply.finished or len(self._said_next) > 0)

    def _spoken(self) -> str:
        """The assistant's words the user may just have heard (its last few sentences)."""
        return " ".join(self.reply.said[-3:]) if self.reply is not None else self._recent

    # ---- replies

    def _start_reply(self, text: str) -> _Reply:
        if self.reply is not None:
            self._end_reply(self.reply)
        content: str | list[TextPart | ImagePart] = text
        if self.latest_frame is not None:
            image = base64.b64encode(encode_jpeg(self.latest_frame)).decode()
            content = [TextPart(text=text), ImagePart(data=image)]
        self.history.append(ChatMessage(role="user", content=content))
        stack = self.stack
        messages = trim_history(self.history, stack.context_tokens, reserve_tokens=stack.max_reply_tokens)
        request = ReplyRequest(
            messages,
            LlmParams(temperature=self.params.temperature, max_tokens=stack.max_reply_tokens),
            speak=True,
            voice=self.voice,
        )
        reply = _Reply()
        reply.thread = threading.Thread(target=self._produce, args=(reply, request), daemon=True)
        self.reply = reply
        reply.thread.start()
        return reply

    def _produce(self, reply: _Reply, request: ReplyRequest) -> None:
        try:
            for piece in self.speak(request, reply.stop):
                if isinstance(piece, Word):
                    reply.words.append(piece.text)
                elif isinstance(piece, Spoken):
                    text = piece.text if piece.starts_sentence else ""
                    with self._progress:
                        reply.pieces.append((piece.audio, text))
                        self._progress.notify_all()
        except BaseException as exc:  # the reply fails; the session goes on listening
            reply.failed = exc
            log.exception("duplex reply failed")
        finally:
            with self._progress:
                reply.finished = True
                self._progress.notify_all()

    def _take(self, reply: _Reply, want: int) -> tuple[np.ndarray, str]:
        parts: list[np.ndarray] = []
        texts: list[str] = []
        got = 0
        while reply.pieces and got < want:
            audio, text = reply.pieces.popleft()
            if got + len(audio) > want:  # keep the rest for the next unit
                cut = want - got
                reply.pieces.appendleft((audio[cut:], ""))
                audio = audio[:cut]
            parts.append(audio)
            got += len(audio)
            if text:
                # units carry text deltas (their concatenation is what was said): pieces after the
                # reply's first are set off by a space
                texts.append(" " + text if reply.said else text)
                reply.said.append(text)
        audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return audio.astype(np.float32, copy=False), "".join(texts)

    def _end_reply(self, reply: _Reply) -> None:
        """Stop the reply and keep what the user heard of it in the history."""
        reply.stop.set()
        if reply.thread is not None:
            reply.thread.join(timeout=5)
        said = " ".join(reply.said).strip()
        self._recent = " ".join(reply.said[-3:])
        if said:
            self.history.append(ChatMessage(role="assistant", content=said))
        if self.reply is reply:
            self.reply = None
