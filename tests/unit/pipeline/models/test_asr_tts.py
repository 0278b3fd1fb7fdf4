"""The ASR and TTS stage handlers on the streaming scheduler, with fake models: slots, batching,
utterances, interleaved replies."""

from __future__ import annotations

import threading
import time

import numpy as np

from omnivox.pipeline.models.asr import WhisperSlots
from omnivox.pipeline.models.tts import TtsSlots
from omnivox.pipeline.models.voice_chunks import (
    ClipTranscript,
    FinalTranscript,
    PartialTranscript,
    ReplySpoken,
    ReplyWritten,
    TranscribeClip,
    TranscribeStream,
    UtteranceAudio,
    UtteranceEnd,
    VoiceChunk,
    WordChunk,
    asr_output,
    reply_output,
    to_values,
)
from omnivox.pipeline.scheduler import IncomingMessage
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.voice.tts.base import StreamingTts


class FakeWhisper:
    windows_s = (10.0, 20.0, 30.0)

    def __init__(self) -> None:
        self.batches: list[int] = []

    def transcribe_batch(self, clips):
        self.batches.append(len(clips))
        return [f"{len(c)} samples" for c in clips]


class FakeTts(StreamingTts):
    def _synthesize(self, text, voice, stop, speed):
        yield np.full(240, len(text), np.float32)


def drain(s, until, timeout=5.0):
    got = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, got
        got.extend(s.outbox.drain())
        time.sleep(0.002)
    return got


def chunk(rid, message):
    return IncomingMessage(rid, "stream_chunk", to_values(message))


def opened(rid, message=None):
    return IncomingMessage(rid, "new_request", to_values(message) if message else {"streaming": True})


def spoken(o):
    return reply_output(o.data).text


def test_finals_of_every_session_are_decoded_in_one_batch() -> None:
    whisper = FakeWhisper()
    s = StreamingScheduler(WhisperSlots(whisper, partial_ms=0, batch=8), slots=4)  # type: ignore[arg-type]
    for rid in "abc":
        s.inbox.put(opened(rid, TranscribeStream()))
        s.inbox.put(chunk(rid, UtteranceAudio(np.zeros(1600, np.float32))))
        s.inbox.put(chunk(rid, UtteranceEnd(0)))
    s.start()
    try:
        got = drain(s, lambda g: len(g) >= 3)
        held = s.slots_used
    finally:
        s.stop()
    assert sorted((o.request_id, asr_output(o.data)) for o in got) == [
        (rid, FinalTranscript(0, "1600 samples")) for rid in "abc"
    ]
    assert whisper.batches == [3]
    assert held == 3  # the sessions keep their slots between utterances
    assert s.slots_used == 0  # stop frees them


def test_partials_come_as_audio_grows_and_a_one_shot_takes_no_slot() -> None:
    whisper = FakeWhisper()
    s = StreamingScheduler(WhisperSlots(whisper, partial_ms=500, batch=8), slots=1)  # type: ignore[arg-type]
    s.inbox.put(opened("live", TranscribeStream()))
    s.inbox.put(chunk("live", UtteranceAudio(np.zeros(16000, np.float32))))  # 1 s: past the first partial
    s.inbox.put(opened("clip", TranscribeClip(np.zeros(800, np.float32))))
    s.start()
    try:
        got = drain(
            s,
            lambda g: (
                any(o.request_id == "clip" for o in g)
                and any(isinstance(asr_output(o.data), PartialTranscript) for o in g)
            ),
        )
        s.inbox.put(IncomingMessage("live", "stream_done", {}))
        got += drain(s, lambda g: any(o.type == "result" and o.request_id == "live" for o in g))
    finally:
        s.stop()
    clip = next(o for o in got if o.request_id == "clip")
    assert clip.type == "result" and asr_output(clip.data) == ClipTranscript("800 samples")
    assert PartialTranscript(0, "16000 samples") in [asr_output(o.data) for o in got]
    assert s.slots_used == 0


def test_replies_are_spoken_sentence_by_sentence_and_interleaved() -> None:
    s = StreamingScheduler(TtsSlots(FakeTts()), slots=2)
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
    s = StreamingScheduler(TtsSlots(FakeTts()), slots=3)
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
    s = StreamingScheduler(TtsSlots(FakeTts()), slots=1)
    s.inbox.put(opened("r", ReplyWritten("", 0)))
    s.start()
    try:
        (out,) = drain(s, lambda g: len(g) >= 1)
    finally:
        s.stop()
    assert out.type == "result" and out.data == to_values(ReplySpoken(0))


def test_a_conversation_goes_back_to_its_kv_slot() -> None:
    from omnivox.pipeline.models.llm import SlotAffinity

    slots = SlotAffinity(2)
    a = slots.take("a")
    slots.give_back(a)
    b = slots.take("b")
    slots.give_back(b)
    assert a != b and slots.take("a") == a  # its keys and values are still there
    assert slots.take("a") == b  # its own slot is busy: the other one (a miss)
    assert slots.take("c") is None  # none free: the runtime queues it
    assert (slots.hits, slots.misses) == (1, 3)


def test_slots_are_numbered_across_runtimes() -> None:
    from omnivox.pipeline.models.llm import ServerSlots
    from omnivox.voice.llm.base import ChatLlm, LlmParams

    class Runtime(ChatLlm):
        def __init__(self, name: str) -> None:
            self.name, self.calls = name, []

        def stream(self, messages, params=None, stop=None):
            self.calls.append(params.cache_slot)
            yield self.name

    a, b = Runtime("a"), Runtime("b")
    llm = ServerSlots([a, b])
    said = ["".join(llm.stream([], LlmParams(cache_slot=slot))) for slot in range(4)]
    assert said == ["a", "b", "a", "b"]  # consecutive slots alternate runtimes
    assert (a.calls, b.calls) == ([0, 1], [0, 1])  # each runtime's own slot numbers
    assert {"".join(llm.stream([], LlmParams())) for _ in range(2)} == {"a", "b"}  # no slot: in turn
