"""The pipeline's voice models end to end on an in-process pipeline (real coordinator, stages and
ZeroMQ sockets on loopback) with fake models behind the real stage handlers: what ``RemoteAsr``
hears, what ``pipeline_reply`` yields (``voice.reply``'s pieces), and ``RemoteTts``'s voice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from inprocess_pipeline import Running, spec_of, start_pipeline
from omnivox.engines import pipeline_voice
from omnivox.engines.pipeline_voice import RemoteAsr, RemoteLlm, RemoteTts, pipeline_prefill, pipeline_reply
from omnivox.pipeline.models.asr import WhisperSlots
from omnivox.pipeline.models.llm import reply_runner
from omnivox.pipeline.models.tts import TtsSlots
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.reply import FirstToken, ReplyRequest, Spoken, Word
from omnivox.voice.tts.base import StreamingTts

REPLY = "Hello there, my friend. How are you today? Fine."


class FakeWhisper:
    windows_s = (10.0, 20.0, 30.0)

    def transcribe_batch(self, clips):
        return [f"{len(c)} samples" for c in clips]


class ScriptedLlm(ChatLlm):
    name = "scripted"

    def __init__(self) -> None:
        self.prefilled: list[str] = []

    def prefill_turn(self, messages, params=None):
        self.prefilled.append(messages[-1].content)
        if messages[-1].content == "slow":
            time.sleep(1.0)  # as behind other sessions' replies

    def stream(self, messages, params=None, stop=None):
        for i in range(0, len(REPLY), 5):  # deltas that split words
            yield REPLY[i : i + 5]


class FakeTts(StreamingTts):
    def __init__(self) -> None:
        self.spoken: list[tuple[str, str, float]] = []

    @property
    def voices(self) -> tuple[str, ...]:
        return ("default", "amy")

    def _synthesize(self, text, voice, stop, speed):
        self.spoken.append((text, voice, speed))
        yield np.full(240, 0.1, np.float32)
        yield np.full(120, 0.2, np.float32)


CASCADE = spec_of(
    {"name": "asr", "scheduler": "streaming", "model": "whisper", "slots": 2, "stream": ["client"]},
    {"name": "llm", "scheduler": "parallel", "model": "chat", "slots": 2, "next": ["tts", "client"]}
    | {"stream": ["tts", "client"]},
    {"name": "tts", "scheduler": "streaming", "model": "hibari", "slots": 2, "stream": ["client"]},
)


@pytest.fixture
def stages() -> Iterator[tuple[Running, FakeTts]]:
    tts = FakeTts()
    llm = ScriptedLlm()

    def build(spec: StageSpec) -> Scheduler:
        if spec.name == "asr":
            return StreamingScheduler(WhisperSlots(FakeWhisper(), partial_ms=0, batch=2), spec.slots)  # type: ignore[arg-type]  # a fake Whisper
        if spec.name == "llm":
            return ParallelScheduler(reply_runner(llm), slots=spec.slots)
        return StreamingScheduler(TtsSlots(tts), spec.slots)

    running = start_pipeline(CASCADE, build)
    running.llm = llm  # type: ignore[attr-defined]
    yield running, tts
    running.stop()


def reply(running: Running, **kwargs) -> list:
    request = ReplyRequest([ChatMessage(role="user", content="hi")], LlmParams(), **kwargs)
    return list(pipeline_reply(running.client(), request, threading.Event(), session="s1"))


def test_a_reply_is_words_then_each_sentence_s_audio(stages) -> None:
    running, tts = stages
    pieces = reply(running, voice="amy", speed=1.25)
    assert isinstance(pieces[0], FirstToken) and pieces[0].after_s >= 0
    words = [p.text for p in pieces if isinstance(p, Word)]
    assert "".join(words) == REPLY and all(w.strip() for w in words)  # whole words
    spoken = [p for p in pieces if isinstance(p, Spoken)]
    sentences = [p.text for p in spoken if p.starts_sentence]
    assert " ".join(sentences) == REPLY and len(sentences) >= 3
    assert all(p.audio.dtype == np.float32 for p in spoken)
    assert [len(p.audio) for p in spoken] == [240, 120] * len(sentences)
    assert {(voice, speed) for _, voice, speed in tts.spoken} == {("amy", 1.25)}


def test_a_text_reply_speaks_nothing(stages) -> None:
    running, tts = stages
    pieces = reply(running, speak=False)
    assert "".join(p.text for p in pieces if isinstance(p, Word)) == REPLY
    assert not [p for p in pieces if isinstance(p, Spoken)] and tts.spoken == []


def test_a_prefill_reaches_the_llm_stage_and_comes_back_with_nothing_said(stages) -> None:
    running, tts = stages
    request = ReplyRequest([ChatMessage(role="user", content="call my")], LlmParams())
    pipeline_prefill(running.client(), request, session="s1")  # returns once the stage computed it
    assert running.llm.prefilled == ["call my"] and tts.spoken == []


def test_a_prefill_waiting_too_long_is_given_up_and_the_reply_goes_on(stages, monkeypatch) -> None:
    running, _ = stages
    monkeypatch.setattr(pipeline_voice, "PREFILL_WAIT_S", 0.1)
    began = time.monotonic()
    pipeline_prefill(
        running.client(), ReplyRequest([ChatMessage(role="user", content="slow")], LlmParams()), "s1"
    )
    assert time.monotonic() - began < 0.9  # the output thread is free for the reply
    assert "".join(p.text for p in reply(running, speak=False) if isinstance(p, Word)) == REPLY


def test_the_llm_alone_streams_the_reply_text(stages) -> None:
    running, _ = stages
    assert "".join(RemoteLlm(running.client()).stream([ChatMessage(role="user", content="hi")])) == REPLY


def test_the_tts_alone_speaks_in_the_voice_asked_for(stages) -> None:
    running, tts = stages
    remote = RemoteTts(running.client(), ("default", "amy"), "default")
    audio = list(remote._synthesize("One sentence.", "amy", threading.Event(), 0.5))
    assert [len(a) for a in audio] == [240, 120]
    assert tts.spoken == [("One sentence.", "amy", 0.5)]


def test_the_hearing_holds_a_slot_and_hears_each_utterance(stages) -> None:
    running, _ = stages
    asr = RemoteAsr(running.client())
    asr.open_stream()
    for n in (3, 5):
        for _ in range(n):
            asr.feed(np.zeros(1600, np.float32))
        assert asr.flush().text == f"{n * 1600} samples"
    asr.feed(np.zeros(800, np.float32))
    asr.reset()  # the utterance in flight is dropped and the slot given back
    assert asr.transcribe(np.zeros(4000, np.float32)).text == "4000 samples"  # a clip: no slot


def test_the_hearing_sends_its_audio_in_pieces_and_a_flush_sends_what_is_held(stages, monkeypatch) -> None:
    running, _ = stages
    asr = RemoteAsr(running.client())
    asr.open_stream()
    request = asr._request
    assert request is not None
    sent: list[tuple[int, float]] = []  # (samples, their sum) of each piece of audio sent
    stream = request.stream

    def spy(values: dict) -> None:
        if values["type"] == "utterance_audio":
            sent.append((len(values["audio"]), float(np.sum(values["audio"]))))
        stream(values)

    monkeypatch.setattr(request, "stream", spy)
    chunk = np.zeros(640, np.float32)  # 40 ms appends
    for _ in range(7):
        asr.feed(chunk)
        chunk[:] = 0.5  # the caller reuses its buffer: what is held must not change
    assert sent == [(1920, 640.0), (1920, 960.0)]  # 120 ms pieces; the first append was silence
    assert asr.flush().text == f"{7 * 640} samples"  # the 40 ms still held went before the end
    assert sent[2] == (640, 320.0)
    asr.feed(np.zeros(640, np.float32))
    asr.reset()  # an utterance dropped: its held audio is never sent
    assert len(sent) == 3
