"""Streaming ASR: one decoder reused across utterances and sessions, clean after an abandoned one."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import WEATHER
from omnivox.voice.asr.base import Hypothesis, StreamingAsr, Transcript, normalize_words, word_error_rate
from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr

RATE = 16000
SENTENCES = [
    WEATHER,
    "please call my mother tomorrow morning",
    "turn off the lights in the kitchen",
    "how long does it take to cook rice",
    "set an alarm for seven thirty",
]


def with_silence(audio: np.ndarray, seconds: float = 0.3) -> np.ndarray:
    pad = np.zeros(int(seconds * RATE), np.float32)
    return np.concatenate([pad, audio, pad])


@pytest.fixture(scope="module")
def utterances(hibari_tts) -> list[np.ndarray]:
    from omnivox.audio.resample import resample

    return [
        with_silence(resample(np.concatenate([c.audio for c in hibari_tts.synthesize(s)]), 24000, RATE))
        for s in SENTENCES
    ]


def test_ten_utterances_in_a_row_use_one_decoder(utterances) -> None:
    loads = PocketsphinxAsr.loads
    asr = PocketsphinxAsr()
    texts = [asr.transcribe(utterances[i % len(utterances)]).text for i in range(10)]
    assert PocketsphinxAsr.loads == loads + 1
    errors = [word_error_rate(SENTENCES[i % len(SENTENCES)], t) for i, t in enumerate(texts)]
    assert max(errors) <= 0.10, list(zip(texts, errors, strict=True))


def test_sessions_reuse_the_decoder_and_an_abandoned_one_leaves_no_trace(asr, utterances) -> None:
    loads = PocketsphinxAsr.loads
    fresh = PocketsphinxAsr().transcribe(utterances[2])
    assert PocketsphinxAsr.loads == loads + 1

    # a session that heard one utterance and died in the middle of the next
    asr.transcribe(utterances[1])
    half = utterances[0][: len(utterances[0]) // 2]
    for i in range(0, len(half), 320):
        asr.feed(half[i : i + 320])
    assert asr.in_utterance
    asr.reset()

    again = asr.transcribe(utterances[2])
    assert again == fresh  # same words, same times: nothing carried over
    assert PocketsphinxAsr.loads == loads + 1


def test_word_times_are_on_the_session_clock(asr, utterances) -> None:
    first = asr.transcribe(utterances[0])
    second = asr.transcribe(utterances[1])
    first_len_ms = len(utterances[0]) * 1000 / RATE
    assert first.start_ms == 0 and second.start_ms == first_len_ms
    assert second.words[0].start_ms > first_len_ms + 200  # after the leading 300 ms of silence
    asr.reset()
    assert asr.audio_ms == 0 and asr.transcribe(utterances[0]).start_ms == 0


def test_flush_without_audio_is_an_empty_final(asr) -> None:
    t = asr.flush()
    assert t == Transcript("", (), final=True, start_ms=0.0)


def test_silence_transcribes_to_nothing(asr) -> None:
    assert asr.transcribe(np.zeros(RATE, np.float32)).text == ""


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
