"""The LLM stage: ``reply_runner`` with scripted LLMs (words, the voice for the TTS, stops,
failures, KV slots by conversation), slot affinity, several runtimes as one, and the stage as a
client of a remote OpenAI-compatible server (the suite's fake)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from fake_openai_service import FakeOpenAIService, fake_reply
from omnivox.core.config import Settings
from omnivox.pipeline.models.llm import ServerSlots, SlotAffinity, reply_runner
from omnivox.pipeline.models.registry import build_scheduler
from omnivox.pipeline.models.voice_chunks import (
    FirstTokenChunk,
    ReplyPrompt,
    ReplyWritten,
    VoiceChunk,
    WordChunk,
    llm_output,
    to_values,
)
from omnivox.pipeline.scheduler import IncomingMessage
from omnivox.pipeline.spec import StageSpec
from omnivox.voice.llm.base import ChatLlm, LlmParams

from .harness import drain


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


class PrefilledLlm(ScriptedLlm):
    """Records each prefill: (the last message's words, the slot)."""

    def __init__(self) -> None:
        super().__init__(["ok "])
        self.prefilled: list[tuple[str, int | None]] = []

    def prefill_turn(self, messages, params=None):
        self.prefilled.append((messages[-1].content, params.cache_slot if params is not None else None))


def test_a_prefill_computes_the_words_so_far_into_the_conversation_s_slot_and_says_nothing() -> None:
    llm = PrefilledLlm()
    affinity = SlotAffinity(2)
    run = reply_runner(llm, affinity)
    run(to_values(ReplyPrompt([], session="a")), threading.Event(), lambda v: None)  # a's reply: a slot
    reply_slot = llm.params[0].cache_slot
    emitted: list[dict] = []
    so_far = ReplyPrompt([{"role": "user", "content": "call my"}], session="a", prefill=True)
    assert run(to_values(so_far), threading.Event(), emitted.append) == to_values(ReplyWritten("", 0))
    assert emitted == [] and llm.prefilled == [("call my", reply_slot)] and len(llm.params) == 1
    run(to_values(ReplyPrompt([], session="a")), threading.Event(), lambda v: None)
    assert llm.params[1].cache_slot == reply_slot  # the reply goes to the slot the prefill computed
    assert (affinity.hits, affinity.misses) == (1, 1)  # the prefill is not counted apart


def test_a_prefill_never_takes_a_slot_holding_another_conversation() -> None:
    llm = PrefilledLlm()
    affinity = SlotAffinity(1)
    run = reply_runner(llm, affinity)
    run(to_values(ReplyPrompt([], session="a")), threading.Event(), lambda v: None)
    b = ReplyPrompt([{"role": "user", "content": "hi"}], session="b", prefill=True)
    assert run(to_values(b), threading.Event(), lambda v: None) == to_values(ReplyWritten("", 0))
    assert llm.prefilled == []  # a's keys and values stay: b's reply computes its prompt itself
    assert affinity.take("a") == 0  # (and the slot was not left taken)


def test_server_slots_send_a_prefill_to_the_runtime_of_its_slot() -> None:
    a, b = PrefilledLlm(), PrefilledLlm()
    llm = ServerSlots([a, b])
    from omnivox.protocol.chat import ChatMessage

    words = [ChatMessage(role="user", content="so far")]
    llm.prefill_turn(words, LlmParams(cache_slot=3))
    llm.prefill_turn(words, LlmParams())  # no slot of its own: nothing kept anywhere
    assert (a.prefilled, b.prefilled) == ([], [("so far", 1)])


USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def service() -> Iterator[FakeOpenAIService]:
    s = FakeOpenAIService().start()
    yield s
    s.stop()


@pytest.fixture
def stage(service):
    service.state.token_delay_s = 0.0
    service.state.chat_disconnected = False
    settings = Settings(llm_url=service.url + "/v1", llm_model="fake-model")
    scheduler = build_scheduler(StageSpec(name="llm", scheduler="parallel", model="chat", slots=2), settings)
    scheduler.start()
    yield scheduler
    scheduler.stop()


def test_a_reply_streams_word_by_word_from_the_remote_server(stage, service) -> None:
    assert stage.info["model"] != "echo"
    prompt = ReplyPrompt(USER, max_tokens=64, voice="v", speed=1.0)
    stage.inbox.put(IncomingMessage("r", "new_request", to_values(prompt)))
    got = drain(stage, lambda g: any(m.type == "result" for m in g), timeout=10.0)
    streamed = [llm_output(m.data) for m in got if m.type == "stream"]
    words = [c.text for c in streamed if isinstance(c, WordChunk)]
    assert "".join(words).strip() == fake_reply(USER)
    before_words = streamed[: next(i for i, c in enumerate(streamed) if isinstance(c, WordChunk))]
    # the TTS stage reading the stream learns the voice from it, before the first word
    assert VoiceChunk("v", 1.0) in before_words
    assert got[-1].type == "result" and got[-1].data == to_values(ReplyWritten("".join(words), len(words)))
    assert service.state.requests[-1]["model"] == "fake-model"


def test_an_abort_stops_the_remote_stream_and_frees_the_slot(stage, service) -> None:
    service.state.token_delay_s = 0.2
    stage.inbox.put(IncomingMessage("r", "new_request", to_values(ReplyPrompt(USER))))
    drain(stage, lambda g: any(m.data.get("type") == "word" for m in g), timeout=10.0)
    stage.abort("r")
    deadline = time.monotonic() + 10
    while stage.load()["running"] or not service.state.chat_disconnected:
        assert time.monotonic() < deadline, stage.load()
        time.sleep(0.02)
    time.sleep(0.3)
    assert not [m for m in stage.outbox.drain() if m.type == "result"]  # an aborted request ends silently
