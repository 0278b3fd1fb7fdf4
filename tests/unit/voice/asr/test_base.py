"""The streaming ASR contract (utterances, partials, the session clock, reset) and word error rate."""

from __future__ import annotations

import functools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from omnivox.core.errors import InvalidAudio
from omnivox.voice.asr.base import (
    Hypothesis,
    StreamingAsr,
    TimedWord,
    Transcript,
    normalize_words,
    word_error_rate,
)

RATE = 16000


class _Scripted(StreamingAsr):
    """A backend whose hypotheses are scripted: checks the base class's partial/final logic."""

    def __init__(self, script: list[str]) -> None:
        super().__init__()
        self.script = list(script)

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        text = self.script.pop(0) if self.script else None
        return None if text is None else (text, [(w, 0.0, 10.0) for w in text.split()])

    def _end(self) -> Hypothesis:
        return ("done", [("done", 0.0, 10.0)])


def test_partials_only_when_the_hypothesis_changes() -> None:
    asr = _Scripted(["a", "a", "a b", "a b"])
    frame = np.zeros(160, np.float32)
    got = [asr.feed(frame) for _ in range(4)]
    assert [g.text if g else None for g in got] == ["a", None, "a b", None]
    final = asr.flush()
    assert final.final and final.text == "done" and not asr.in_utterance


def test_word_error_rate() -> None:
    assert word_error_rate("What is the weather?", "what is the weather") == 0.0
    assert word_error_rate("a b c d", "a x c") == 0.5  # one substitution, one deletion
    assert word_error_rate("a b", "a b c d") == 1.0  # two insertions
    assert word_error_rate("", "") == 0.0 and word_error_rate("", "x") == 1.0
    assert normalize_words("It's 'quoted', OK!") == ["it's", "quoted", "ok"]


class _Recorder(StreamingAsr):
    """Logs every hook call. Each fed chunk's hypothesis is the words heard so far: one word ("w<n>")
    per 100 ms of audio, timed within the utterance; the final adds "end"."""

    def __init__(self, sample_rate: int = RATE, fail_end: bool = False) -> None:
        super().__init__()
        self.sample_rate = sample_rate
        self.calls: list[tuple] = []
        self.fail_end = fail_end
        self._samples = 0

    def _words(self) -> list[tuple[str, float, float]]:
        n = self._samples * 10 // self.sample_rate
        return [(f"w{i}", i * 100.0, (i + 1) * 100.0) for i in range(n)]

    def _begin(self) -> None:
        self.calls.append(("begin",))
        self._samples = 0

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        self.calls.append(("process", len(audio), audio.dtype))
        self._samples += len(audio)
        words = self._words()
        return (" ".join(w for w, _, _ in words), words) if words else None

    def _end(self) -> Hypothesis:
        self.calls.append(("end",))
        if self.fail_end:
            raise RuntimeError("backend died")
        words = [*self._words(), ("end", self._samples * 1000.0 / self.sample_rate, 0.0)]
        return " ".join(w for w, _, _ in words), words

    def _reset_session(self) -> None:
        self.calls.append(("reset_session",))

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


class _Abandoning(_Recorder):
    """A backend that can drop an utterance without finishing it (as an HTTP backend can)."""

    def _abandon(self) -> None:
        self.calls.append(("abandon",))


def ms(n: float) -> np.ndarray:
    return np.zeros(int(RATE * n / 1000), np.float32)


def test_transcript_and_word_defaults() -> None:
    t = Transcript("hello")
    assert t.words == () and not t.final and t.start_ms == 0.0
    with pytest.raises(AttributeError):
        t.text = "changed"  # type: ignore[misc]
    assert TimedWord("a", 1.0, 2.0) == TimedWord("a", 1.0, 2.0)
    assert StreamingAsr.streaming and StreamingAsr.sample_rate == 16000


def test_the_first_feed_begins_an_utterance_and_later_feeds_continue_it() -> None:
    asr = _Recorder()
    assert not asr.in_utterance
    asr.feed(ms(20))
    asr.feed(ms(20))
    assert asr.in_utterance and asr.names() == ["begin", "process", "process"]
    asr.flush()
    assert not asr.in_utterance and asr.names()[-1] == "end"
    asr.feed(ms(20))
    assert asr.names().count("begin") == 2


def test_partials_carry_the_words_so_far_and_are_not_final() -> None:
    asr = _Recorder()
    assert asr.feed(ms(50)) is None  # no words yet
    p = asr.feed(ms(150))
    assert p == Transcript("w0 w1", (TimedWord("w0", 0.0, 100.0), TimedWord("w1", 100.0, 200.0)), final=False)
    assert asr.feed(ms(50)) is None  # still two words: no new partial


def test_word_times_are_on_the_session_clock_not_the_utterance_clock() -> None:
    asr = _Recorder()
    asr.feed(ms(1000))
    first = asr.flush()
    assert first.start_ms == 0.0 and first.words[0] == TimedWord("w0", 0.0, 100.0)
    partial = asr.feed(ms(200))
    assert partial is not None and partial.start_ms == 1000.0
    assert partial.words[0] == TimedWord("w0", 1000.0, 1100.0)
    final = asr.flush()
    assert final.final and final.start_ms == 1000.0 and final.words[-1].start_ms == 1200.0
    assert asr.audio_ms == 1200.0


def test_flush_without_an_utterance_is_empty_at_the_current_stream_time() -> None:
    asr = _Recorder()
    asr.feed(ms(500))
    asr.flush()
    calls = len(asr.calls)
    assert asr.flush() == Transcript("", (), final=True, start_ms=500.0)
    assert len(asr.calls) == calls  # the backend is not asked


def test_a_new_utterance_reports_a_partial_equal_to_the_last_one() -> None:
    asr = _Recorder()
    assert asr.feed(ms(100)).text == "w0"  # type: ignore[union-attr]
    asr.flush()
    assert asr.feed(ms(100)).text == "w0"  # type: ignore[union-attr]


def test_flush_ends_the_utterance_even_when_the_backend_fails() -> None:
    asr = _Recorder(fail_end=True)
    asr.feed(ms(100))
    with pytest.raises(RuntimeError):
        asr.flush()
    assert not asr.in_utterance
    asr.fail_end = False
    asr.feed(ms(100))
    assert asr.names().count("begin") == 2 and asr.flush().text == "w0 end"


def test_reset_abandons_through_end_by_default() -> None:
    asr = _Recorder()
    asr.feed(ms(100))
    asr.reset()
    assert asr.names() == ["begin", "process", "end", "reset_session"]
    assert not asr.in_utterance and asr.audio_ms == 0.0


def test_reset_uses_the_backend_abandon_hook_when_it_has_one() -> None:
    asr = _Abandoning()
    asr.feed(ms(100))
    asr.reset()
    assert asr.names() == ["begin", "process", "abandon", "reset_session"]


def test_reset_between_utterances_abandons_nothing_but_clears_the_session() -> None:
    asr = _Recorder()
    asr.feed(ms(100))
    asr.flush()
    asr.calls.clear()
    asr.reset()
    asr.reset()
    assert asr.names() == ["reset_session", "reset_session"]
    assert asr.feed(ms(100)).start_ms == 0.0  # type: ignore[union-attr]


def test_reset_forgets_the_last_partial() -> None:
    asr = _Recorder()
    asr.feed(ms(100))
    asr.reset()
    assert asr.feed(ms(100)) is not None  # "w0" again, but in a new session


def test_transcribe_feeds_frames_of_frame_ms() -> None:
    asr = _Recorder()
    final = asr.transcribe(np.zeros(1000, np.float32))
    assert [c[1] for c in asr.calls if c[0] == "process"] == [320, 320, 320, 40]
    assert final.final and asr.names()[-1] == "end"
    asr.calls.clear()
    asr.transcribe(np.zeros(5, np.float32), frame_ms=0.01)  # less than a sample: one sample per frame
    assert [c[1] for c in asr.calls if c[0] == "process"] == [1] * 5
    asr.calls.clear()
    asr.transcribe(np.zeros(800, np.float32), frame_ms=50.0)
    assert [c[1] for c in asr.calls if c[0] == "process"] == [800]


def test_transcribe_of_nothing_is_an_empty_final() -> None:
    asr = _Recorder()
    assert asr.transcribe(np.zeros(0, np.float32)) == Transcript("", (), final=True, start_ms=0.0)
    assert asr.calls == []


def test_the_clock_follows_the_backend_rate() -> None:
    asr = _Recorder(sample_rate=8000)
    asr.feed(np.zeros(8000, np.float32))
    asr.flush()
    assert asr.audio_ms == 1000.0
    assert asr.feed(np.zeros(800, np.float32)).start_ms == 1000.0  # type: ignore[union-attr]


def test_int16_frames_reach_the_backend_as_float32() -> None:
    asr = _Recorder()
    asr.feed(np.zeros(160, np.int16))
    assert asr.calls[-1] == ("process", 160, np.float32)


@pytest.mark.parametrize(
    "audio", [np.zeros((2, 160), np.float32), np.array([np.nan], np.float32), np.array(["x"])]
)
def test_bad_audio_is_rejected_before_an_utterance_starts(audio: np.ndarray) -> None:
    asr = _Recorder()
    with pytest.raises(InvalidAudio):
        asr.feed(audio)
    assert not asr.in_utterance and asr.calls == [] and asr.audio_ms == 0.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("well-known 3.5 km", ["well", "known", "3", "5", "km"]),
        ("'tis the dogs' bone", ["tis", "the", "dogs", "bone"]),
        ("'' -- ...", []),
        ("   ", []),
        ("don't DON'T", ["don't", "don't"]),
    ],
)
def test_normalize_words(text: str, words: list[str]) -> None:
    assert normalize_words(text) == words


def test_normalize_words_keeps_accented_letters() -> None:
    assert normalize_words("Café naïve, Über!") == ["café", "naïve", "über"]
    assert word_error_rate("été", "t") == 1.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cafe\u0301 CAFÉ", ["café", "café"]),  # a combining accent is the precomposed letter
        ("Straße STRASSE", ["strasse", "strasse"]),  # casefolded, not just lowercased
        ("Привет, мир!", ["привет", "мир"]),
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # vowel signs are combining marks: the words stay whole
        ("don’t «quoted» snake_case", ["don't", "quoted", "snake", "case"]),
        ("😀 ¿Qué? ½", ["qué", "1", "2"]),  # NFKC spells the fraction out, symbols split words
    ],
)
def test_normalize_words_is_unicode_aware(text: str, words: list[str]) -> None:
    assert normalize_words(text) == words


def test_accents_count_in_the_word_error_rate() -> None:
    assert word_error_rate("el niño", "el nino") == 0.5
    assert word_error_rate("Crème brûlée.", "crème BRÛLÉE") == 0.0


def levenshtein(a: list[str], b: list[str]) -> int:
    """Edit distance by the textbook recursion (independent of the row-by-row implementation)."""

    @functools.cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


WORDS = st.lists(st.sampled_from(["the", "cat", "sat", "on", "a", "mat", "it's"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(WORDS, WORDS)
def test_wer_is_the_word_edit_distance_over_the_reference_length(ref: list[str], hyp: list[str]) -> None:
    wer = word_error_rate(" ".join(ref), " ".join(hyp))
    if ref:
        assert wer == levenshtein(ref, hyp) / len(ref)
        assert 0.0 <= wer <= max(len(ref), len(hyp)) / len(ref)
    else:
        assert wer == (0.0 if not hyp else 1.0)
    if ref and hyp:  # the distance is symmetric, the rate is normalised by each side's length
        assert wer * len(ref) == pytest.approx(word_error_rate(" ".join(hyp), " ".join(ref)) * len(hyp))


@settings(max_examples=100, deadline=None)
@given(WORDS.filter(bool))
def test_wer_extremes(ref: list[str]) -> None:
    text = " ".join(ref)
    assert word_error_rate(text, text) == 0.0
    assert word_error_rate(text, "") == 1.0  # everything deleted
    assert word_error_rate(text.upper() + "?!", f'"{text}".') == 0.0  # case and punctuation do not count


class _Covering(_Recorder):
    """Keeps its last partial and the utterance samples it heard, and ends on it when it covers."""

    def __init__(self) -> None:
        super().__init__()
        self.partial: tuple[int, Hypothesis] | None = None

    def _process(self, audio: np.ndarray) -> Hypothesis | None:
        hyp = super()._process(audio)
        if hyp is not None:
            self.partial = (self._samples, hyp)
        return hyp

    def _end_covered(self, samples: int) -> Hypothesis | None:
        self.calls.append(("end_covered", samples))
        if self.partial is None or self.partial[0] < samples:
            return None
        return self.partial[1]


def test_a_partial_that_heard_the_speech_to_its_end_is_the_final() -> None:
    asr = _Covering()
    asr.feed(ms(300))
    final = asr.flush(speech_ms=250)  # the speech ended 250 ms into the utterance: the partial heard it
    assert final.final and final.text == "w0 w1 w2" and not asr.in_utterance
    assert ("end_covered", 4000) in asr.calls and "end" not in asr.names()


def test_a_partial_short_of_the_speech_end_leaves_the_final_to_a_decode() -> None:
    asr = _Covering()
    asr.feed(ms(300))
    final = asr.flush(speech_ms=400)
    assert final.text == "w0 w1 w2 end" and asr.names()[-2:] == ["end_covered", "end"]
    asr.feed(ms(100))
    assert asr.flush().text == "w0 end" and asr.names()[-1] == "end"  # no speech end: always decoded


def test_a_backend_that_keeps_no_partials_decodes_the_final_whatever_the_speech_end() -> None:
    asr = _Recorder()
    asr.feed(ms(200))
    assert asr.flush(speech_ms=100).text == "w0 w1 end" and asr.names()[-1] == "end"
