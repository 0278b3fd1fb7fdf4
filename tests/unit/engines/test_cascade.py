"""The cascade engine with the embedded models: speech in (Whisper), transcript + echo reply + speech out."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.audio.resample import resample
from omnivox.audio.wav import write_wav
from omnivox.core.config import Settings
from omnivox.core.errors import InvalidAudio, PrefillRequired
from omnivox.engines.base import GenerateParams, GenResult
from omnivox.engines.registry import build_engine
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.voice.asr.base import word_error_rate

WEATHER = "what is the weather like in paris today"


@pytest.fixture(scope="module")
def engine():
    e = build_engine(Settings(engine="cascade", llm="echo"))  # Whisper hears, echo answers
    e.load()
    yield e
    e.close()


@pytest.fixture
def cascade(engine):
    """The engine's turn-based role, from a fresh conversation."""
    engine.chat.reset()
    engine.end_session()
    return engine.chat


@pytest.fixture(scope="module")
def speech(engine) -> np.ndarray:
    """hibari saying WEATHER (24 kHz)."""
    return np.concatenate([c.audio for c in engine.voice.tts.synthesize(WEATHER)])


def audio_message(audio: np.ndarray, rate: int = 24000, **part) -> ChatMessage:
    data = {"type": "audio", "data": pcm16_to_b64(audio), "sample_rate": rate, **part}
    return ChatMessage(role="user", content=[data])


def run(engine, params: GenerateParams, stop: threading.Event | None = None):
    result = GenResult()
    chunks = list(engine.generate(params, stop or threading.Event(), result))
    return chunks, result


def test_spoken_question_is_transcribed_answered_and_spoken(cascade, speech) -> None:
    message = audio_message(speech)
    stats = cascade.prefill([message])
    assert len(stats.transcripts) == 1 and word_error_rate(WEATHER, stats.transcripts[0]) <= 0.1
    assert stats.cached_tokens == 0 and stats.input_tokens > 0
    # the routing hash is over what the client sent (the audio), not the transcript
    assert history_hash(cascade.held_messages()) == history_hash([message])

    chunks, result = run(cascade, GenerateParams(generate_audio=True))
    text = "".join(c.text_delta for c in chunks)
    assert text == result.text and text.startswith("You said: ")
    assert word_error_rate(WEATHER, text.removeprefix("You said: ")) <= 0.1
    audio = np.concatenate([c.audio for c in chunks if c.audio is not None])
    assert len(audio) > 24000 and float(np.abs(audio).max()) > 0.05  # a second or more of speech
    # the text came before the audio that speaks it: the first chunk is a word, not a sentence's sound
    assert chunks[0].text_delta and chunks[0].audio is None
    assert cascade.held_messages()[-1] == ChatMessage(role="assistant", content=text)


def test_text_only_reply_has_no_audio_and_the_next_turn_reuses_history(cascade) -> None:
    cascade.prefill([ChatMessage(role="user", content="hello there")])
    chunks, _ = run(cascade, GenerateParams())
    assert all(c.audio is None for c in chunks)
    stats = cascade.prefill([ChatMessage(role="user", content="again")])
    assert stats.cached_tokens > 0 and stats.message_count == 3
    _, result = run(cascade, GenerateParams(max_new_tokens=3))
    assert result.text == "You said: again"


def test_wav_and_other_rates_are_heard(cascade, speech) -> None:
    wav = write_wav(resample(speech, 24000, 16000), 16000)
    import base64

    part = {"type": "audio", "data": base64.b64encode(wav).decode(), "format": "wav"}
    stats = cascade.prefill([ChatMessage(role="user", content=[{"type": "text", "text": "hey"}, part])])
    assert word_error_rate(WEATHER, stats.transcripts[0]) <= 0.1
    s48 = cascade.prefill([audio_message(resample(speech, 24000, 48000), rate=48000)])
    assert word_error_rate(WEATHER, s48.transcripts[0]) <= 0.1


def test_stop_cuts_the_reply_and_keeps_what_was_said(cascade) -> None:
    cascade.prefill([ChatMessage(role="user", content="one two three four five six seven eight")])
    stop = threading.Event()
    result = GenResult()
    said = []
    for chunk in cascade.generate(GenerateParams(generate_audio=True), stop, result):
        said.append(chunk.text_delta)
        if len(said) == 3:
            stop.set()
    assert result.stopped and len(said) == 3
    assert result.text == "".join(said).strip() == "You said: one"
    assert cascade.held_messages()[-1].content == "You said: one"


def test_bad_audio_is_refused_and_changes_nothing(cascade) -> None:
    cascade.prefill([ChatMessage(role="user", content="first")])
    before = cascade.held_messages()
    bad = ChatMessage(role="user", content=[{"type": "audio", "data": "not base64!!", "sample_rate": 16000}])
    with pytest.raises(InvalidAudio):
        cascade.prefill([ChatMessage(role="user", content="fine"), bad])
    odd_rate = audio_message(np.zeros(1100, np.float32), rate=12345)
    with pytest.raises(InvalidAudio):
        cascade.prefill([odd_rate])
    assert cascade.held_messages() == before


def test_generate_without_a_user_message_is_refused(cascade) -> None:
    with pytest.raises(PrefillRequired):
        run(cascade, GenerateParams())


def test_a_session_dying_mid_utterance_leaves_a_clean_decoder(engine, speech) -> None:
    asr = engine.stack.asr
    fresh = asr.transcribe(resample(speech, 24000, 16000)).text
    asr.reset()
    asr.feed(resample(speech[: len(speech) // 2], 24000, 16000))  # the session dies here
    assert asr.in_utterance
    engine.end_session()  # what the worker does when any session ends
    assert not asr.in_utterance and asr.audio_ms == 0
    assert asr.transcribe(resample(speech, 24000, 16000)).text == fresh


def test_what_the_cascade_serves_is_what_its_roles_serve(engine) -> None:
    from omnivox.engines.base import capabilities_of
    from omnivox.engines.cascade import CAPABILITIES

    assert engine.voice is engine.stack and engine.chat is not None and engine.duplex is None
    assert capabilities_of(engine) == CAPABILITIES  # duplex over its voice models; the echo LLM sees nothing
