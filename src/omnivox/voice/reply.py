"""The one reply producer: LLM stream -> whole words -> sentences -> cleaned text -> TTS audio.

Every spoken reply omnivox makes goes through ``produce_reply``: the cascade engine's streaming
turns, realtime responses, and ``bench voice`` (which so measures the code the server runs). It
yields, as they happen:

- ``FirstToken``: the LLM's first delta arrived (its latency from the call);
- ``Word``: a whole word with the whitespace before it (``"".join`` of them is the reply text);
- ``Spoken``: a piece of a sentence's audio, with the cleaned text of that sentence, as soon as the
  TTS makes it, while the LLM goes on writing the next sentence;
- ``ToolCallDelta``: a piece of a function call (when ``request.llm.tools`` offered some and the
  LLM can call them), and ``Usage``: the LLM's token counts, where it reports them;
- ``ToolRunning`` / ``ToolResult``: a tool the server runs itself started and ended
  (``voice.tool_rounds``, with ``request.server_tools``);
- ``ReplyFailed``: the reply could not be made (the LLM failed before its first word) and what
  follows is ``request.apology`` (``with_apology``), so the listener hears why rather than silence.

Blocking (LLM and TTS calls): run it in a thread. ``stop`` ends it within one LLM delta or TTS piece;
nothing is yielded after ``stop`` is set, not even a word the chunker still held back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams, ToolCallDelta, Usage
from omnivox.voice.llm.words import WordChunker
from omnivox.voice.tool_calls import ServerTools, ToolResult, ToolRunning
from omnivox.voice.tts.base import SentenceChunker, StreamingTts

# The first audio of a reply speaks at most this many words: a 135M model on one core writes a
# 20-word first sentence in about half a second, which the listener would otherwise wait through;
# on a shared core it writes ~20 tokens a second, so each first word cut is ~50-70 ms of
# voice-to-voice (issue 23: 3 against 6, docs/benchmarks.md). The next piece ends after at most
# ``THEN_WORDS`` (or at a clause break), so it is written and spoken while those three words play
# (about a second of hibari's speech): with the rest of a long sentence there, the audio ran dry.
FIRST_WORDS = 3
THEN_WORDS = 8


@dataclass(frozen=True)
class ReplyRequest:
    messages: list[ChatMessage]
    llm: LlmParams
    speak: bool = True  # False: text only (no sentences, no TTS)
    voice: str | None = None  # None: the TTS's default
    speed: float | None = None  # None: the TTS's configured pace
    apology: str = ""  # said instead when the reply fails before its first word ("": fail)
    server_tools: ServerTools | None = None  # tools the server runs itself (``voice.tool_rounds``)
    traceparent: str | None = None  # the span it is made under (W3C): a pipeline's stages continue it


@dataclass(frozen=True)
class FirstToken:
    after_s: float  # from the call to the LLM's first delta


@dataclass(frozen=True)
class Word:
    text: str  # a whole word with the whitespace that preceded it


@dataclass(frozen=True)
class Spoken:
    text: str  # the cleaned sentence this audio speaks
    audio: np.ndarray  # float32 mono at the TTS's rate (24 kHz)
    synth_s: float  # time the TTS took for this piece
    starts_sentence: bool  # the first piece of its sentence


@dataclass(frozen=True)
class ReplyFailed:
    error: BaseException  # why no reply could be made; the apology's words and audio follow


ReplyPiece = FirstToken | Word | Spoken | ToolCallDelta | ToolRunning | ToolResult | Usage | ReplyFailed


def produce_reply(
    llm: ChatLlm,
    tts: StreamingTts | None,
    request: ReplyRequest,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[ReplyPiece]:
    """Stream the reply to ``request.messages`` as words and, when ``request.speak``, speech."""
    began = clock()
    words = WordChunker()
    sentences = (
        SentenceChunker(first_max_words=FIRST_WORDS, then_max_words=THEN_WORDS)
        if request.speak and tts is not None
        else None
    )

    def on_words(batch: list[str]) -> Iterator[ReplyPiece]:
        for word in batch:
            if stop.is_set():
                return
            yield Word(word)
            if sentences is not None:
                # a word the chunker gave is whole (the next has begun, or the text ended)
                for sentence in sentences.push(word, whole=True):
                    yield from say(tts, sentence, request, stop, clock)

    first = True
    for delta in llm.stream_events(request.messages, request.llm, stop):
        if first and not isinstance(delta, Usage):
            yield FirstToken(clock() - began)
            first = False
        if isinstance(delta, str):
            yield from on_words(words.push(delta))
        elif not stop.is_set():
            yield delta
        if stop.is_set():
            return
    yield from on_words(words.flush())
    if sentences is not None and not stop.is_set():
        for sentence in sentences.flush():
            yield from say(tts, sentence, request, stop, clock)


def say(
    tts: StreamingTts | None,
    sentence: str,
    request: ReplyRequest,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Spoken]:
    """One sentence's audio, piece by piece as the TTS makes it."""
    assert tts is not None
    first = True
    start = clock()
    for chunk in tts.speak(sentence, voice=request.voice, stop=stop, speed=request.speed):
        yield Spoken(chunk.text, chunk.audio, clock() - start, first)
        first = False
        start = clock()


def speak_text(
    tts: StreamingTts | None, text: str, request: ReplyRequest, stop: threading.Event
) -> Iterator[Word | Spoken]:
    """Say ``text`` as a reply says it (its words, then each sentence's audio when ``request.speak``)."""
    words = WordChunker()
    for word in [*words.push(text), *words.flush()]:
        yield Word(word)
    if not request.speak or tts is None:
        return
    sentences = SentenceChunker(first_clause_words=0)
    for sentence in [*sentences.push(text), *sentences.flush()]:
        if stop.is_set():
            return
        yield from say(tts, sentence, request, stop)


def with_apology(
    pieces: Iterator[ReplyPiece], tts: StreamingTts | None, request: ReplyRequest, stop: threading.Event
) -> Iterator[ReplyPiece]:
    """``pieces``, or, when they fail before a word was said, ``ReplyFailed`` then the apology
    (``request.apology``; with none the failure is raised, as it is once anything was said)."""
    said = False
    try:
        for piece in pieces:
            said = (
                said
                or isinstance(piece, Spoken | ToolCallDelta)
                or (isinstance(piece, Word) and bool(piece.text.strip()))
            )
            yield piece
    except Exception as exc:
        if said or not request.apology or stop.is_set():
            raise
        yield ReplyFailed(exc)
        yield from speak_text(tts, request.apology, request, stop)
