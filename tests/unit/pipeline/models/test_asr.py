"""The ASR stage's handler (``WhisperSlots``) with fake Whisper models: a session's utterances
in its slot, finals and partials batched across sessions, one-shot clips, refused chunks."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.core.errors import BadPipelineMessage
from omnivox.pipeline.models.asr import MIN_PARTIAL_S, WhisperSlots
from omnivox.pipeline.models.voice_chunks import (
    ClipTranscript,
    FinalTranscript,
    PartialTranscript,
    StreamTranscribed,
    TranscribeClip,
    TranscribeStream,
    UtteranceAudio,
    UtteranceDrop,
    UtteranceEnd,
    WordChunk,
    asr_output,
    to_values,
)
from omnivox.pipeline.scheduler import IncomingMessage
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.voice.stack import ASR_RATE

from .harness import chunk, drain, opened


class FakeWhisper:
    windows_s = (10.0, 20.0, 30.0)

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def transcribe_batch(self, clips):
        self.batches.append([len(c) for c in clips])
        return [f"{len(c)}" for c in clips]


def audio(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * ASR_RATE), np.float32)


def sound(seconds: float) -> dict:
    return to_values(UtteranceAudio(audio(seconds)))


def end(utterance: int) -> dict:
    return to_values(UtteranceEnd(utterance))


def final(utterance: int, text: str) -> tuple[str, dict]:
    return ("stream", to_values(FinalTranscript(utterance, text)))


STREAM = to_values(TranscribeStream())


def test_asr_a_clip_takes_no_slot_and_ends_with_its_text() -> None:
    asr = FakeWhisper()
    h = WhisperSlots(asr, partial_ms=0, batch=4)
    clip = to_values(TranscribeClip(np.zeros(1600, np.float32)))
    assert h.needs_slot(STREAM) and h.needs_slot({"streaming": True}) and not h.needs_slot(clip)
    state = h.open(None, clip)
    assert state.oneshot and state.ended and h.pending(state)
    assert h.step([state]) == [[("result", to_values(ClipTranscript("1600")))]]
    assert not h.pending(state)


def test_asr_a_flush_gives_the_final_of_that_utterance() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=4)
    state = h.open(0, STREAM)
    assert not h.pending(state)
    h.chunk(state, sound(0.5))
    h.chunk(state, sound(0.25))
    assert not h.pending(state)  # no partials, no final yet
    h.chunk(state, end(3))
    assert h.pending(state) and state.utterance == 4 and state.samples == 0
    assert h.step([state]) == [[final(3, str(int(0.75 * ASR_RATE)))]]
    assert state.heard == 1


def test_asr_a_chunk_that_is_not_one_is_refused() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=4)
    state = h.open(0, STREAM)
    for bad in ({}, {"audio": audio(0.5), "flush": 0}, to_values(WordChunk("hi")), {"type": "utterance_end"}):
        with pytest.raises(BadPipelineMessage):
            h.chunk(state, bad)
    with pytest.raises(BadPipelineMessage):
        h.chunk(state, {"type": "utterance_audio", "audio": [0.0, 0.1]})  # a list is not an array
    assert state.samples == 0 and not state.finals


def test_asr_drop_forgets_the_utterance_in_progress() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=4)
    state = h.open(0, STREAM)
    h.chunk(state, sound(1.0))
    h.chunk(state, to_values(UtteranceDrop()))
    assert state.samples == 0 and state.utterance == 1
    h.chunk(state, end(1))
    assert h.step([state]) == [[final(1, "0")]]  # nothing of the dropped audio


def test_asr_the_end_of_the_stream_reports_how_many_finals_were_heard() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=4)
    state = h.open(0, STREAM)
    for n in range(2):
        h.chunk(state, sound(0.1))
        h.chunk(state, end(n))
    h.done(state, {})
    (out,) = h.step([state])
    assert [kind for kind, _ in out] == ["stream", "stream", "result"]
    assert out[-1] == ("result", to_values(StreamTranscribed(2)))


def test_asr_finals_wait_for_room_in_the_batch_and_the_result_waits_for_them() -> None:
    asr = FakeWhisper()
    h = WhisperSlots(asr, partial_ms=0, batch=2)
    state = h.open(0, STREAM)
    for n in range(3):
        h.chunk(state, sound(0.1))
        h.chunk(state, end(n))
    h.done(state, {})
    first = h.step([state])[0]
    assert first == [final(0, "1600"), final(1, "1600")]  # no result while a final waits
    second = h.step([state])[0]
    assert second == [final(2, str(int(0.1 * ASR_RATE))), ("result", to_values(StreamTranscribed(3)))]
    assert asr.batches == [[1600, 1600], [1600]]
    assert h.load()["decode_calls"] == 2.0 and h.load()["decode_max_batch"] == 2.0


def test_asr_partials_come_once_enough_new_audio_arrived() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=200, batch=4)
    state = h.open(0, STREAM)
    h.chunk(state, sound(MIN_PARTIAL_S / 2))
    assert not h._partial_due(state)
    h.chunk(state, sound(MIN_PARTIAL_S / 2))
    assert h._partial_due(state)
    h._partials_after = 0.0
    out = h.step([state])[0]
    assert out == [("stream", to_values(PartialTranscript(0, str(int(MIN_PARTIAL_S * ASR_RATE)))))]
    assert not h._partial_due(state)  # the next needs partial_ms more audio
    h.chunk(state, sound(0.2))
    assert h._partial_due(state)


def test_asr_no_partials_when_disabled_or_for_long_audio() -> None:
    off = WhisperSlots(FakeWhisper(), partial_ms=0, batch=4)
    state = off.open(0, STREAM)
    off.chunk(state, sound(2.0))
    assert not off._partial_due(state)
    on = WhisperSlots(FakeWhisper(), partial_ms=200, batch=4)
    long = on.open(0, STREAM)
    on.chunk(long, sound(FakeWhisper.windows_s[-1]))  # past the last window's margin
    assert not on._partial_due(long)


def test_asr_no_partial_in_a_step_that_has_a_final() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=100, batch=4)
    talking, ending = h.open(0, STREAM), h.open(1, STREAM)
    h.chunk(talking, sound(1.0))
    h.chunk(ending, sound(0.3))
    h.chunk(ending, end(0))
    h._partials_after = 0.0
    outs = h.step([talking, ending])
    assert outs[0] == []  # the partial waits
    assert outs[1][0] == final(0, str(int(0.3 * ASR_RATE)))
    assert h.load()["finals"] == 1.0 and h.load()["partials"] == 0.0
    h._partials_after = 0.0
    assert h.step([talking, ending])[0][0][1] == to_values(PartialTranscript(0, str(int(1.0 * ASR_RATE))))
    load = h.load()
    assert load["partials"] == 1.0 and load["finals"] == 1.0  # the decode time split the same way
    assert load["final_decode_s"] + load["partial_decode_s"] <= load["decode_s"] + 0.01


def test_asr_close_forgets_everything() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=1)
    state = h.open(0, STREAM)
    h.chunk(state, sound(0.3))
    h.chunk(state, end(0))
    h.chunk(state, sound(0.3))
    h.close(state)
    assert not state.finals and state.samples == 0 and not state.chunks
    h.reset_slot(0)  # nothing to do, and harmless


def test_asr_empty_audio_chunks_are_ignored() -> None:
    h = WhisperSlots(FakeWhisper(), partial_ms=0, batch=1)
    state = h.open(0, STREAM)
    h.chunk(state, sound(0.0))
    assert state.samples == 0 and state.chunks == []


def test_asr_on_the_streaming_scheduler_a_session_holds_its_slot() -> None:
    from omnivox.pipeline.scheduler import IncomingMessage

    s = StreamingScheduler(WhisperSlots(FakeWhisper(), partial_ms=0, batch=2), slots=1)
    s.start()
    try:
        s.inbox.put(IncomingMessage("session", "new_request", STREAM))
        s.inbox.put(IncomingMessage("session", "stream_chunk", sound(0.1)))
        s.inbox.put(IncomingMessage("session", "stream_chunk", end(0)))
        s.inbox.put(IncomingMessage("session", "stream_done", {}))
        got = []
        import time

        deadline = time.monotonic() + 10
        while not any(o.type == "result" for o in got):
            assert time.monotonic() < deadline, got
            got.extend(s.outbox.drain())
            time.sleep(0.002)
        assert [o.type for o in got] == ["stream", "result"]
        assert got[-1].data == to_values(StreamTranscribed(1))
    finally:
        s.stop()
        s.outbox.close()


class BatchCountingWhisper:
    windows_s = (10.0, 20.0, 30.0)

    def __init__(self) -> None:
        self.batches: list[int] = []

    def transcribe_batch(self, clips):
        self.batches.append(len(clips))
        return [f"{len(c)} samples" for c in clips]


def test_finals_of_every_session_are_decoded_in_one_batch() -> None:
    whisper = BatchCountingWhisper()
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
    whisper = BatchCountingWhisper()
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
