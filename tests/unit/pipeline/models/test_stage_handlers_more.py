"""The model stages' handlers called directly with fake models: ASR slots, TTS slots, the LLM runner,
slot affinity and the stage registry (no scheduler thread, no model loaded)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from omnivox.core.config import Settings
from omnivox.core.errors import BadPipelineMessage
from omnivox.pipeline.models.asr import MIN_PARTIAL_S, WhisperSlots
from omnivox.pipeline.models.llm import ServerSlots, SlotAffinity, reply_runner
from omnivox.pipeline.models.registry import MODELS, build_scheduler
from omnivox.pipeline.models.tts import TtsSlots
from omnivox.pipeline.models.voice_chunks import (
    ClipTranscript,
    FinalTranscript,
    FirstTokenChunk,
    PartialTranscript,
    ReplyPrompt,
    ReplySpoken,
    ReplyWritten,
    SpeakText,
    SpokenChunk,
    StreamTranscribed,
    TranscribeClip,
    TranscribeStream,
    UtteranceAudio,
    UtteranceDrop,
    UtteranceEnd,
    VoiceChunk,
    WordChunk,
    llm_output,
    reply_output,
    to_values,
)
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec
from omnivox.voice.llm.base import ChatLlm, LlmParams
from omnivox.voice.stack import ASR_RATE
from omnivox.voice.tts.base import StreamingTts


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


# ---- ASR


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


# ---- TTS


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


# ---- LLM


class ScriptedLlm(ChatLlm):
    name = "scripted"

    def __init__(self, deltas: list[str], fail: bool = False) -> None:
        self.deltas = deltas
        self.fail = fail
        self.params: list[LlmParams | None] = []
        self.messages: list = []

    def stream(self, messages, params=None, stop=None):
        self.params.append(params)
        self.messages.append(list(messages))
        for delta in self.deltas:
            if stop is not None and stop.is_set():
                return
            yield delta
        if self.fail:
            from omnivox.core.errors import EngineFailure

            raise EngineFailure("server went away")


def test_llm_reply_streams_words_after_the_voice_for_the_tts() -> None:
    llm = ScriptedLlm(["Hel", "lo wor", "ld, fr", "iend"])
    emitted: list[dict] = []
    run = reply_runner(llm)
    prompt = ReplyPrompt([{"role": "user", "content": "hi"}], temperature=0.3, max_tokens=9, voice="v")
    result = run(to_values(prompt), threading.Event(), emitted.append)
    chunks = [llm_output(e) for e in emitted]
    assert isinstance(chunks[0], FirstTokenChunk) and chunks[0].after_s >= 0
    assert chunks[1] == VoiceChunk("v") and VoiceChunk("v") not in chunks[2:]
    words = [c.text for c in chunks[2:] if isinstance(c, WordChunk)]
    assert len(words) == len(chunks) - 2 and "".join(words) == "Hello world, friend"
    assert result == to_values(ReplyWritten("Hello world, friend", len(words)))
    assert llm.params[0].temperature == 0.3 and llm.params[0].max_tokens == 9
    assert llm.params[0].cache_slot is None
    assert llm.messages[0][0].content == "hi"


def test_llm_an_empty_reply() -> None:
    emitted: list[dict] = []
    result = reply_runner(ScriptedLlm([]))(to_values(ReplyPrompt([])), threading.Event(), emitted.append)
    assert result == to_values(ReplyWritten("", 0)) and emitted == []


def test_llm_a_set_stop_emits_no_words() -> None:
    stop = threading.Event()
    stop.set()
    emitted: list[dict] = []
    result = reply_runner(ScriptedLlm(["one two three "]))(to_values(ReplyPrompt([])), stop, emitted.append)
    assert [e for e in emitted if e["type"] == "word"] == [] and result == to_values(ReplyWritten("", 0))


def test_llm_a_failure_propagates_and_gives_the_slot_back() -> None:
    affinity = SlotAffinity(1)
    run = reply_runner(ScriptedLlm(["a "], fail=True), affinity)
    with pytest.raises(Exception, match="server went away"):
        run(to_values(ReplyPrompt([], session="s")), threading.Event(), lambda v: None)
    assert affinity.take("other") == 0  # the slot is free again


def test_llm_the_session_picks_the_cache_slot() -> None:
    llm = ScriptedLlm(["ok "])
    affinity = SlotAffinity(2)
    run = reply_runner(llm, affinity)
    for session in "aba":
        run(to_values(ReplyPrompt([], session=session)), threading.Event(), lambda v: None)
    slots = [p.cache_slot for p in llm.params]
    assert slots[0] == slots[2] and slots[0] != slots[1]
    run(to_values(ReplyPrompt([])), threading.Event(), lambda v: None)  # no session: the runtime picks
    assert llm.params[-1].cache_slot is None


def test_slot_affinity_without_a_session_takes_nothing() -> None:
    affinity = SlotAffinity(2)
    assert affinity.take(None) is None
    affinity.give_back(None)  # harmless
    assert (affinity.hits, affinity.misses) == (0, 0)


def test_slot_affinity_prefers_the_least_recently_used_free_slot() -> None:
    affinity = SlotAffinity(3)
    taken = [affinity.take(s) for s in "abc"]
    assert sorted(taken) == [0, 1, 2]
    for slot in (taken[2], taken[0], taken[1]):
        affinity.give_back(slot)
    assert affinity.take("new") == taken[2]  # given back first: used least recently


def test_server_slots_pass_warm_and_close_to_every_runtime() -> None:
    class Runtime(ChatLlm):
        name = "rt"

        def __init__(self) -> None:
            self.warmed = 0
            self.closed = 0

        def stream(self, messages, params=None, stop=None):
            yield ""

        def warm(self, messages):
            self.warmed += 1

        def close(self):
            self.closed += 1

    runtimes = [Runtime(), Runtime(), Runtime()]
    llm = ServerSlots(runtimes)
    assert llm.name == "rt"
    llm.warm([])
    llm.close()
    assert [r.warmed for r in runtimes] == [1, 1, 1] and [r.closed for r in runtimes] == [1, 1, 1]


# ---- the registry


def stage(model: str, scheduler: str, **kw) -> StageSpec:
    return StageSpec.model_validate({"name": "s", "scheduler": scheduler, "model": model, **kw})


@pytest.mark.parametrize(
    ("model", "scheduler", "kind"),
    [
        ("noop", "simple", SimpleScheduler),
        ("noop", "parallel", ParallelScheduler),
        ("echo", "streaming", StreamingScheduler),
        ("count", "ar", ARScheduler),
        ("fail", "simple", SimpleScheduler),
    ],
)
def test_registry_builds_the_builtin_models(model: str, scheduler: str, kind: type) -> None:
    s = build_scheduler(stage(model, scheduler), Settings())
    try:
        assert isinstance(s, kind) and s.info["model"] == model
    finally:
        s.outbox.close()


def test_registry_refuses_an_unknown_model_naming_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        build_scheduler(stage("gpt-17", "simple"), Settings())
    assert "gpt-17" in str(info.value) and "whisper" in str(info.value) and "noop" in str(info.value)


@pytest.mark.parametrize(("model", "kinds"), [(m, k) for m, (k, _) in MODELS.items()])
def test_registry_refuses_a_model_on_the_wrong_scheduler_before_loading(model: str, kinds: tuple) -> None:
    wrong = next(k for k in ("simple", "streaming", "ar", "parallel") if k not in kinds)
    with pytest.raises(ValueError) as info:
        build_scheduler(stage(model, wrong), Settings())
    assert " or ".join(kinds) in str(info.value)


def test_registry_builds_the_tiny_encoders_without_a_model() -> None:
    s = build_scheduler(stage("tiny_audio_encoder", "simple", batch=3), Settings())
    try:
        assert isinstance(s, SimpleScheduler) and s.info == {"model": "audio"} and s.max_batch == 3
        assert s.batch_compute is not None
        (out,) = s.batch_compute([{"audio": np.ones(1600, np.float32), "text": "hey"}])
        assert (
            out["text"] == "hey" and out["embedding"].shape == (16,) and out["embedding"].dtype == np.float32
        )
    finally:
        s.outbox.close()
