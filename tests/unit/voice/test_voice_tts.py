"""Streaming TTS: sentence chunking, audio per sentence as it completes, cancellation, reuse."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.tts.base import SentenceChunker, StreamingTts
from omnivox.voice.tts.hibari import HibariTts, available_voices

REPLY = "Sure, here is the forecast for you. It will be sunny in Paris. Enjoy your day!"


def words_of(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def chunk_all(text: str, **kw) -> list[str]:
    c = SentenceChunker(**kw)
    out = [s for w in words_of(text) for s in c.push(w)]
    return out + c.flush()


def test_sentences_come_out_as_soon_as_they_end() -> None:
    c = SentenceChunker(first_clause_words=0)
    assert c.push("Hello there. How") == ["Hello there."]
    assert c.push(" are you?") == []  # "?" at the very end: the next piece may continue it
    assert c.push(" Fine") == ["How are you?"]
    assert c.flush() == ["Fine"]


def test_first_chunk_may_end_at_a_clause_break() -> None:
    assert chunk_all("Well, the weather today, as it happens, is fine. Later, rain.") == [
        "Well, the weather today,",
        "as it happens, is fine.",
        "Later, rain.",
    ]


def test_abbreviations_stage_directions_and_long_runs() -> None:
    assert chunk_all("Dr. Smith is here. *waves. smiles.* Hi!", first_clause_words=0) == [
        "Dr. Smith is here.",
        "*waves. smiles.* Hi!",
    ]
    long = " ".join(["word"] * 50)
    parts = chunk_all(long, max_words=20)
    assert [len(p.split()) for p in parts] == [20, 20, 10]


def test_chunking_keeps_every_word() -> None:
    text = "One, two three four. Five six? Seven!\n\nEight nine, ten."
    assert " ".join(chunk_all(text)).split() == text.split()


def test_hibari_streams_one_chunk_per_sentence(hibari_tts) -> None:
    loads = HibariTts.loads
    chunks = list(hibari_tts.stream(words_of("*smiles* " + REPLY)))
    assert [c.text for c in chunks] == [
        "Sure, here is the forecast for you.",  # first clause had only one word: no early cut
        "It will be sunny in Paris.",
        "Enjoy your day!",
    ]
    for c in chunks:
        assert c.audio.dtype == np.float32 and hibari_tts.sample_rate == 24000
        assert 0.05 < np.abs(c.audio).max() <= 1.0
        assert 0.04 < len(c.audio) / 24000 / len(c.text.split()) < 0.8  # plausible seconds per word
    assert HibariTts.loads == loads  # the session's model, reused


def test_hibari_speech_is_understood(hibari_tts, asr) -> None:
    from omnivox.audio.resample import resample

    text = "The weather is sunny in Paris."
    audio = np.concatenate([c.audio for c in hibari_tts.synthesize(text)])
    heard = asr.transcribe(resample(audio, 24000, 16000)).text
    assert word_error_rate(text, heard) <= 0.2, heard


def test_seed_makes_synthesis_repeatable(hibari_tts) -> None:
    a = np.concatenate([c.audio for c in hibari_tts.synthesize("Hello there.")])
    b = np.concatenate([c.audio for c in hibari_tts.synthesize("Hello there.")])
    assert np.array_equal(a, b)


def test_stop_ends_the_stream_before_the_next_chunk(hibari_tts) -> None:
    stop = threading.Event()
    got = []
    for chunk in hibari_tts.stream(words_of(REPLY), stop=stop):
        got.append(chunk)
        stop.set()  # barge-in right after the first sentence was played
    assert len(got) == 1


def test_stop_while_waiting_for_text_ends_without_synthesising() -> None:
    stop = threading.Event()

    def text() -> Iterator[str]:
        yield "Hello there, "
        stop.set()
        yield "this is never spoken."

    said: list[str] = []

    class Recording(StreamingTts):
        def _synthesize(self, text, voice, stop, speed):
            said.append(text)
            yield np.zeros(10, np.float32)

    assert list(Recording().stream(text(), stop=stop)) == []
    assert said == []


def test_markup_only_sentences_make_no_audio(hibari_tts) -> None:
    assert list(hibari_tts.synthesize("*nods* 😀 ```code```")) == []


def test_voices(hibari_tts) -> None:
    assert "heart" in available_voices() and hibari_tts.voices == available_voices()
    assert hibari_tts.resolve_voice("alloy") == "heart"  # OpenAI voice names fall back to the default
    with pytest.raises(ValueError):
        HibariTts(voice="no-such-voice")
