"""The TTS stage's handler (``TtsSlots``) with fake voices: words cut into sentences and spoken
in the voice sent before them, replies interleaved, the reply spoken least first."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from omnivox.pipeline.models.tts import TtsSlots
from omnivox.pipeline.models.voice_chunks import (
    FirstTokenChunk,
    ReplySpoken,
    ReplyWritten,
    SpeakText,
    SpokenChunk,
    VoiceChunk,
    WordChunk,
    reply_output,
    to_values,
)
from omnivox.pipeline.scheduler import IncomingMessage
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.voice.tts.base import StreamingTts

from .harness import chunk, drain, opened, spoken


class FakeTts(StreamingTts):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str | None, float | None]] = []

    def _synthesize(self, text, voice, stop, speed):
        self.calls.append((text, voice, speed))
        yield np.full(4, len(text), np.float32)
        yield np.full(2, 1, np.float32)


@pytest.fixture
def tts_handler():
    tts = FakeTts()
    return tts, TtsSlots(tts, threads=1)


def test_tts_a_whole_text_is_spoken_and_ends(tts_handler) -> None:
    tts, h = tts_handler
    state = h.open(0, to_values(SpeakText("Hello there. How are you today?", "v1", 1.25)))
    assert state.ended and state.voice == "v1" and state.speed == 1.25
    outs: list = []
    while h.pending(state):
        (out,) = h.step([state])
        outs.extend(out)
        if out and out[-1][0] == "result":
            break
    kinds = [k for k, _ in outs]
    assert kinds[-1] == "result" and outs[-1][1] == to_values(ReplySpoken(state.spoken))
    assert state.spoken >= 1 and all(call[1:] == (tts.resolve_voice("v1"), 1.25) for call in tts.calls)
    pieces = [reply_output(d) for k, d in outs if k == "stream"]
    assert pieces and all(isinstance(p, SpokenChunk) for p in pieces)
    assert sum(p.starts_sentence for p in pieces) == state.spoken


def test_tts_words_make_sentences_in_the_voice_sent_before_them(tts_handler) -> None:
    tts, h = tts_handler
    state = h.open(0, {"streaming": True})
    assert not h.pending(state)
    h.chunk(state, to_values(FirstTokenChunk(0.1)))  # the LLM's latency: nothing to say
    h.chunk(state, to_values(VoiceChunk("amy")))
    for word in ["Hi", " there.", " More", ""]:  # an empty word is nothing
        h.chunk(state, to_values(WordChunk(word)))
    h.done(state, {})
    assert state.voice == "amy" and state.ended
    texts = []
    while True:
        (out,) = h.step([state])
        texts += [p.text for k, d in out if k == "stream" and (p := reply_output(d)).starts_sentence]
        if out and out[-1][0] == "result":
            break
    assert state.spoken == len({c[0] for c in tts.calls})
    assert "More" in " ".join(c[0] for c in tts.calls)


def test_tts_options_keep_their_earlier_values_when_absent(tts_handler) -> None:
    _, h = tts_handler
    state = h.open(0, to_values(SpeakText("", "x", 0.5)))
    h.chunk(state, to_values(VoiceChunk("", None)))
    assert state.voice == "x" and state.speed == 0.5


def test_tts_an_empty_reply_ends_with_no_sentences(tts_handler) -> None:
    _, h = tts_handler
    state = h.open(0, {"streaming": True})
    h.done(state, {})
    assert h.step([state]) == [[("result", to_values(ReplySpoken(0)))]]


def test_tts_the_reply_spoken_least_goes_first(tts_handler) -> None:
    _, h = tts_handler
    ahead = h.open(0, to_values(SpeakText("One. Two. Three.")))
    ahead.spoken = 5
    behind = h.open(1, to_values(ReplyWritten("Alpha. Beta.", 2)))
    outs = h.step([ahead, behind])
    assert outs[0] == [] and outs[1] and behind.spoken == 1


def test_tts_close_stops_and_clears(tts_handler) -> None:
    _, h = tts_handler
    state = h.open(0, to_values(SpeakText("One. Two.")))
    h.close(state)
    assert state.stop.is_set() and not state.sentences
    assert h.load()["sentences"] == 0.0


class LengthTts(StreamingTts):
    def _synthesize(self, text, voice, stop, speed):
        yield np.full(240, len(text), np.float32)


def test_replies_are_spoken_sentence_by_sentence_and_interleaved() -> None:
    s = StreamingScheduler(TtsSlots(LengthTts()), slots=2)
    for rid in "ab":
        s.inbox.put(opened(rid))
        s.inbox.put(chunk(rid, VoiceChunk("x")))
        for word in ["Hello", " there.", " How", " are", " you", " today?"]:
            s.inbox.put(chunk(rid, WordChunk(word)))
        s.inbox.put(IncomingMessage(rid, "stream_done", to_values(ReplyWritten("ignored", 6))))
    s.start()
    try:
        got = drain(s, lambda g: sum(o.type == "result" for o in g) == 2)
    finally:
        s.stop()
    said = [(o.request_id, spoken(o)) for o in got if o.type == "stream"]
    assert [t for r, t in said if r == "a"] == ["Hello there.", "How are you today?"]
    order = [r for r, _ in said]
    assert order.index("b") < len(order) - 2  # b's first sentence did not wait for all of a's
    assert all(o.data == to_values(ReplySpoken(2)) for o in got if o.type == "result")


def test_every_first_sentence_is_spoken_before_any_second_one() -> None:
    s = StreamingScheduler(TtsSlots(LengthTts()), slots=3)
    for rid in "abc":
        s.inbox.put(opened(rid))
        for word in ["One", " two.", " Three", " four", " five."]:
            s.inbox.put(chunk(rid, WordChunk(word)))
        s.inbox.put(IncomingMessage(rid, "stream_done", {}))
    s.start()
    try:
        got = drain(s, lambda g: sum(o.type == "result" for o in g) == 3)
    finally:
        s.stop()
    said = [(o.request_id, spoken(o)) for o in got if o.type == "stream"]
    assert said[:3] == [("a", "One two."), ("b", "One two."), ("c", "One two.")]
    assert sorted(said[3:]) == [(r, "Three four five.") for r in "abc"]


class GatedTts(StreamingTts):
    """Speaks a sentence with "slowly" in it only once the gate opens."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def _synthesize(self, text, voice, stop, speed):
        if "slowly" in text.lower():
            self.gate.wait(30)
        yield np.zeros(240, np.float32)


def test_a_first_sentence_leaves_without_waiting_for_another_reply_s() -> None:
    tts = GatedTts()
    s = StreamingScheduler(TtsSlots(tts), slots=2)
    for rid, first in (("a", "Hello"), ("b", "Slowly")):
        s.inbox.put(opened(rid))
        for word in [first, " there.", " And"]:  # a sentence is whole once the next one starts
            s.inbox.put(chunk(rid, WordChunk(word)))
    s.start()
    try:
        got = drain(s, lambda g: any(o.request_id == "a" and o.type == "stream" for o in g))
        assert not [o for o in got if o.request_id == "b"]  # b is still being spoken
        tts.gate.set()
        drain(s, lambda g: any(o.request_id == "b" for o in g))
    finally:
        tts.gate.set()
        s.stop()


def test_an_empty_reply_still_ends() -> None:
    s = StreamingScheduler(TtsSlots(LengthTts()), slots=1)
    s.inbox.put(opened("r", ReplyWritten("", 0)))
    s.start()
    try:
        (out,) = drain(s, lambda g: len(g) >= 1)
    finally:
        s.stop()
    assert out.type == "result" and out.data == to_values(ReplySpoken(0))
