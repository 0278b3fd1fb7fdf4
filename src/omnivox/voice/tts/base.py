"""The streaming TTS contract: text in (whole or word by word), 24 kHz float32 audio out per phrase.

Speech models sound right only on whole phrases, but waiting for a whole reply adds the LLM's entire
generation time to the latency. So text is cut into sentences as it arrives (``SentenceChunker``), each
sentence is cleaned (``clean.clean_for_speech``) and synthesised, and its audio is yielded at once,
while the LLM is still writing the next one. The first chunk may end at a clause break (a comma after
a few words) so the first audio does not wait for a long first sentence.

Synthesis blocks (model work or HTTP), so the engine runs it in a thread. ``stop`` (a
``threading.Event``) cancels: no chunk is produced after it is set, and a backend abandons the phrase
it is working on at its next check.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from omnivox.voice.tts.clean import clean_for_speech

OUTPUT_RATE = 24000

# end of a sentence: terminal punctuation (and closing quotes/brackets) followed by whitespace
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|\n+")
_CLAUSE_END = re.compile(r"[,;:—]\s+")
_WHITESPACE = re.compile(r"\s+")
_ABBREVIATIONS = {
    "mr.",
    "mrs.",
    "ms.",
    "dr.",
    "st.",
    "prof.",
    "e.g.",
    "i.e.",
    "etc.",
    "vs.",
    "no.",
    "jr.",
    "sr.",
}


@dataclass(frozen=True)
class TtsChunk:
    audio: np.ndarray  # float32 mono at the backend's sample_rate
    text: str  # the cleaned text this audio speaks (for transcripts and captions)


class SentenceChunker:
    """Cut a text stream into sentences for TTS.

    ``push`` text in any pieces, get back the sentences it completed; ``flush`` at the end returns
    the rest. The first sentence of a stream may end early at a clause break once it has
    ``first_clause_words`` words (0 disables this), and, with ``first_max_words``, after that many
    words even without one (the first audio then waits for a few words, not for a long sentence from
    a slow LLM); with ``then_max_words``, the second piece likewise ends after that many words (or
    at a clause break), so it is written and spoken while those few first words play rather than
    the listener waiting on the rest of a long sentence. A run of more than ``max_words`` words without
    punctuation is cut at a space into pieces of at most ``max_words`` words, however the text is
    pushed (a run with no space to cut at, such as tab-separated words, waits for punctuation or the
    flush). Sentence ends inside a ``*stage direction*`` or a code block are ignored, so the cleaner
    sees those whole, and a long run is not cut inside them either.
    """

    def __init__(
        self,
        first_clause_words: int = 4,
        max_words: int = 40,
        first_max_words: int = 0,
        then_max_words: int = 0,
    ) -> None:
        self.first_clause_words = first_clause_words
        self.first_max_words = first_max_words
        self.then_max_words = then_max_words
        self.max_words = max_words
        self._buf = ""
        self._emitted = 0

    def push(self, text: str, whole: bool = False) -> list[str]:
        """Add ``text``; returns the sentences (and first pieces) it completed. ``whole``: the text
        ends where a word ends (its writer saw the next word begin, as ``WordChunker``'s words are
        made), so a cut after that word need not wait for the space that comes with the next one:
        a reply's first words go to the TTS one LLM token sooner."""
        self._buf += text
        out = []
        while (cut := self._next_cut(whole)) is not None:
            sentence, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if sentence:
                out.append(sentence)
                self._emitted += 1
        return out

    def flush(self) -> list[str]:
        rest, self._buf = self._buf.strip(), ""
        self._emitted = 0
        return [rest] if rest else []

    def _next_cut(self, whole: bool = False) -> int | None:
        # a word known whole reads as one followed by its space (a cut there leaves no text behind)
        buf = self._buf + " " if whole and self._buf and not self._buf[-1].isspace() else self._buf
        cut = self._punctuation_cut(buf)
        if cut is not None and len(buf[:cut].split()) <= self.max_words:
            return cut
        # no punctuation within max_words words: the text arrived in a piece larger than max_words
        # words (word by word it would have been cut before its punctuation arrived)
        if len(buf.split()) > self.max_words:
            run_cut = self._long_run_cut(buf)
            if run_cut is not None and (cut is None or run_cut < cut):
                return run_cut
        return cut

    def _punctuation_cut(self, buf: str) -> int | None:
        """After the first sentence end, or (in the first chunk) after a clause break."""
        for m in _SENTENCE_END.finditer(buf):
            if self._inside_markup(buf[: m.start()]) or self._is_abbreviation(buf[: m.start() + 1]):
                continue
            return m.end()
        if self._emitted == 0 and self.first_clause_words:
            for m in _CLAUSE_END.finditer(buf):
                head = buf[: m.start()]
                if len(head.split()) >= self.first_clause_words and not self._inside_markup(head):
                    return m.end()
        if self._emitted == 0 and self.first_max_words:
            return self._words_cut(buf, self.first_max_words)
        if self._emitted == 1 and self.then_max_words:
            for m in _CLAUSE_END.finditer(buf):
                head = buf[: m.start()]
                if len(head.split()) >= self.first_clause_words and not self._inside_markup(head):
                    return m.end()
            return self._words_cut(buf, self.then_max_words)
        return None

    def _words_cut(self, buf: str, n: int) -> int | None:
        """After the ``n``-th word, once the space after it shows the word is whole."""
        words = 0
        for m in _WHITESPACE.finditer(buf):
            if m.start() == 0:
                continue
            words += 1
            if words >= n and not self._inside_markup(buf[: m.start()]):
                return m.end()
        return None

    def _long_run_cut(self, buf: str) -> int | None:
        """Where to cut a run of more than ``max_words`` words that has no punctuation to cut at.

        After the last word that keeps the head within ``max_words`` words and outside markup; where
        markup makes every such cut impossible, at the first space after the markup closes. Cuts are
        made only at spaces followed by another word (the last word may still be arriving).
        """
        best = None
        words = 0
        for m in _WHITESPACE.finditer(buf):
            if m.start() == 0:
                continue
            words += 1  # a whitespace run after the start ends a word
            if m.end() == len(buf) or " " not in m.group() or self._inside_markup(buf[: m.start()]):
                continue
            if words <= self.max_words:
                best = m.end()
            else:
                return best if best is not None else m.end()
        return best

    @staticmethod
    def _inside_markup(text: str) -> bool:
        singles = text.replace("**", "").count("*")
        return singles % 2 == 1 or text.count("```") % 2 == 1

    @staticmethod
    def _is_abbreviation(text: str) -> bool:
        last = text.rsplit(None, 1)[-1].lower() if text.strip() else ""
        return last in _ABBREVIATIONS


class StreamingTts(ABC):
    """Text to 24 kHz speech, phrase by phrase."""

    sample_rate: int = OUTPUT_RATE
    default_voice: str = "default"
    speed: float = 1.0

    @property
    def voices(self) -> tuple[str, ...]:
        """Voices this backend can speak with right now."""
        return (self.default_voice,)

    def resolve_voice(self, voice: str | None) -> str:
        """``voice`` if this backend has it, else its default (clients ask for OpenAI voice names)."""
        return voice if voice in self.voices else self.default_voice

    def synthesize(
        self, text: str, *, voice: str | None = None, stop: threading.Event | None = None
    ) -> Iterator[TtsChunk]:
        """Speak a complete text; yields one chunk per sentence as soon as it is ready."""
        return self.stream([text], voice=voice, stop=stop)

    def stream(
        self,
        pieces: Iterable[str],
        *,
        voice: str | None = None,
        stop: threading.Event | None = None,
        chunker: SentenceChunker | None = None,
    ) -> Iterator[TtsChunk]:
        """Speak text that arrives in pieces (LLM deltas or words); audio per sentence as it completes."""
        stop = stop or threading.Event()
        chunker = chunker or SentenceChunker()
        for piece in pieces:
            if stop.is_set():
                return
            for sentence in chunker.push(piece):
                yield from self.speak(sentence, voice=voice, stop=stop)
        if stop.is_set():  # set while the last piece arrived: the remainder is not spoken either
            return
        for sentence in chunker.flush():
            yield from self.speak(sentence, voice=voice, stop=stop)

    def speak(
        self,
        sentence: str,
        *,
        voice: str | None = None,
        stop: threading.Event | None = None,
        speed: float | None = None,
    ) -> Iterator[TtsChunk]:
        """Clean and speak one sentence (callers that cut text themselves use this directly).

        ``speed`` scales the pace (1.0 natural; None: the backend's configured speed)."""
        stop = stop or threading.Event()
        if stop.is_set():  # never start the backend (a model run, an HTTP request) once stopped
            return
        text = clean_for_speech(sentence)
        if not text or not any(ch.isalnum() for ch in text):
            return
        pace = self.speed if speed is None else speed
        pieces = self._synthesize(text, self.resolve_voice(voice), stop, pace)
        try:
            for audio in pieces:
                if stop.is_set():
                    return
                if len(audio):
                    yield TtsChunk(np.asarray(audio, np.float32), text)
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:  # end the backend's work now, not when the generator is collected
                close()

    @abstractmethod
    def _synthesize(self, text: str, voice: str, stop: threading.Event, speed: float) -> Iterator[np.ndarray]:
        """Audio for one cleaned sentence, in one or more pieces; check ``stop`` between pieces."""
