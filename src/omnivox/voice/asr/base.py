"""The streaming ASR contract, and word error rate.

A recogniser hears one stream at a time, as a sequence of utterances: ``feed`` audio frames (float32
mono at ``sample_rate``) and get a partial hypothesis whenever it changes; ``flush`` ends the utterance
and returns the final one. ``reset`` abandons whatever is in flight and starts a new session on the
same loaded model; nothing of the previous session may leak into the next.

Word times are milliseconds of audio since the last ``reset`` (the stream clock the VAD uses too),
not since the utterance began, so words line up with turn events.

Calls block (model work or HTTP); the engine runs them in a thread. Not thread-safe.
"""

from __future__ import annotations

import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from omnivox.audio.pcm import as_float32


@dataclass(frozen=True)
class TimedWord:
    text: str
    start_ms: float  # stream time since reset
    end_ms: float


@dataclass(frozen=True)
class SpeechScores:
    """How sure a recogniser is that it heard speech, and its words (Whisper's own scores: it
    writes words on a cough or on breath, and says so in these)."""

    no_speech_prob: float  # P(the clip holds no speech), from the first decoding step
    avg_logprob: float  # mean log-probability of the words written (-10: none written)


@dataclass(frozen=True)
class Transcript:
    text: str  # words joined by single spaces (no fillers or silence markers)
    words: tuple[TimedWord, ...] = ()  # empty when the backend gives no timings
    final: bool = False  # True from flush(); partials may still change
    start_ms: float = 0.0  # stream time at which this utterance began
    scores: SpeechScores | None = None  # None: the backend gives none


# What a backend reports for one hypothesis: text and words with times relative to the utterance,
# and (optionally) its scores.
Hypothesis = (
    tuple[str, Sequence[tuple[str, float, float]]]
    | tuple[str, Sequence[tuple[str, float, float]], SpeechScores | None]
)


class StreamingAsr(ABC):
    """Streaming speech recognition over one stream at a time."""

    sample_rate: int = 16000
    streaming: bool = True  # False: no partials, the whole utterance is recognised at flush()
    background_s: float = 0.0  # work done outside feed/flush (background partials), for the RTF

    def __init__(self) -> None:
        self._stream_samples = 0
        self._utterance_start: int | None = None
        self._last_partial = ""

    @property
    def audio_ms(self) -> float:
        """Audio fed since the last reset."""
        return self._stream_samples * 1000.0 / self.sample_rate

    @property
    def in_utterance(self) -> bool:
        return self._utterance_start is not None

    def feed(self, audio: np.ndarray) -> Transcript | None:
        """Add audio to the current utterance (starting one if needed).

        Returns a partial ``Transcript`` when the hypothesis changed, else ``None``.
        """
        a = as_float32(audio)
        if self._utterance_start is None:
            self._utterance_start = self._stream_samples
            self._last_partial = ""
            self._begin()
        self._stream_samples += len(a)
        hyp = self._process(a)
        if hyp is None or hyp[0] == self._last_partial:
            return None
        self._last_partial = hyp[0]
        return self._transcript(hyp, final=False)

    def flush(self, speech_ms: float | None = None) -> Transcript:
        """End the utterance and return its final transcript (empty if nothing was fed).

        ``speech_ms``: the speech is the utterance's first ``speech_ms`` of audio (the VAD's pause
        began there). A partial already decoded (or decoding) over at least that much heard every
        word, so a backend that keeps one may return its words instead of decoding the utterance
        again (``_end_covered``): the final transcript is then ready when that partial is."""
        if self._utterance_start is None:
            return Transcript("", (), final=True, start_ms=self.audio_ms)
        try:
            hyp = None
            if speech_ms is not None:
                hyp = self._end_covered(int(speech_ms * self.sample_rate / 1000))
            if hyp is None:
                hyp = self._end()
            return self._transcript(hyp, final=True)
        finally:
            self._utterance_start = None
            self._last_partial = ""

    def peek(self) -> Transcript:
        """The utterance so far, as well as the backend can tell now without ending it (a streaming
        backend: its latest partial; one that decodes whole utterances decodes what it has)."""
        if self._utterance_start is None:
            return Transcript("", (), final=False, start_ms=self.audio_ms)
        hyp = self._peek()
        return self._transcript(hyp, final=False)

    def _peek(self) -> Hypothesis:
        return (self._last_partial, ())

    def decode_now(self) -> None:  # noqa: B027 - optional hook
        """The speech may just have ended: a backend that decodes partials may start one over the
        utterance so far now, whatever its pace, so that a ``flush`` naming this end takes its words
        (this one keeps none: nothing to do)."""

    def score_texts(self, audio: np.ndarray, texts: Sequence[str]) -> list[float] | None:
        """Each of ``texts`` forced onto ``audio`` (a clip at ``sample_rate``, outside the stream):
        the mean log-probability of its tokens. None: this backend cannot score a given text."""
        return None

    def reset(self) -> None:
        """Abandon any utterance in flight and start a new session; the model stays loaded."""
        if self._utterance_start is not None:
            self._abandon()
        self._utterance_start = None
        self._last_partial = ""
        self._stream_samples = 0
        self._reset_session()

    def transcribe(self, audio: np.ndarray, frame_ms: float = 20.0) -> Transcript:
        """One whole utterance: fed in ``frame_ms`` frames as a live stream would, then flushed."""
        a = as_float32(audio)
        step = max(1, int(self.sample_rate * frame_ms / 1000))
        for i in range(0, len(a), step):
            self.feed(a[i : i + step])
        return self.flush()

    def _transcript(self, hyp: Hypothesis, *, final: bool) -> Transcript:
        assert self._utterance_start is not None
        offset = self._utterance_start * 1000.0 / self.sample_rate
        words = tuple(TimedWord(w, offset + s, offset + e) for w, s, e in hyp[1])
        scores = hyp[2] if len(hyp) == 3 else None
        return Transcript(hyp[0], words, final, offset, scores)

    def _begin(self) -> None:  # noqa: B027 - optional hook
        """A new utterance starts."""

    @abstractmethod
    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        """Consume audio of the current utterance; the current hypothesis if the backend has one."""

    @abstractmethod
    def _end(self) -> Hypothesis:
        """Finish the utterance and return the final hypothesis."""

    def _end_covered(self, samples: int) -> Hypothesis | None:
        """Finish the utterance with a partial decoded over at least its first ``samples`` samples
        (everything said), if there is one; None: there is none (``_end`` decodes it)."""
        return None

    def _abandon(self) -> None:
        """Drop the utterance in flight without a result (defaults to finishing and discarding)."""
        self._end()

    def _reset_session(self) -> None:  # noqa: B027 - optional hook
        """Clear anything the backend adapted to the previous session's speaker."""


# a word is a run of letters, digits and combining marks of any script (so "café", "naïve", "Über"
# and Devanagari with its vowel signs stay whole), with apostrophes inside it ("don't"); everything
# else (punctuation, symbols, spaces, "_") separates words
_APOSTROPHES = re.compile("[\u2019\u02bc]")  # ’ and ʼ are written for ' too


def _word_char(c: str) -> bool:
    return c == "'" or unicodedata.category(c)[0] in "LNM"


def normalize_words(text: str) -> list[str]:
    """Casefolded words without punctuation: the form WER is computed on.

    Unicode-aware: letters of any script are kept (NFKC-normalised, so a precomposed "é" and "e" plus
    a combining accent are the same word); punctuation and symbols split words; apostrophes are kept
    inside a word and dropped at its edges.
    """
    folded = _APOSTROPHES.sub("'", unicodedata.normalize("NFKC", text).casefold())
    spaced = "".join(c if _word_char(c) else " " for c in unicodedata.normalize("NFC", folded))
    return [w for w in (t.strip("'") for t in spaced.split()) if w]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """(substitutions + deletions + insertions) / reference words, on normalised words.

    An empty reference gives 0.0 for an empty hypothesis and 1.0 otherwise.
    """
    ref, hyp = normalize_words(reference), normalize_words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    prev = list(range(len(hyp) + 1))  # Levenshtein over words, one row at a time
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1] / len(ref)
