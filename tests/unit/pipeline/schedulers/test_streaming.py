"""``StreamingScheduler`` with fake handlers: fixed slots and their queue, batched steps, chunks
in order, failures, aborts, and nothing after ``stop``."""

from __future__ import annotations

import time

import pytest

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.builtin import EchoHandler
from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
)
from omnivox.pipeline.schedulers.streaming import StreamingScheduler

from .harness import chunk, collect, done, ends, has, new, wait_for


def test_streaming_holds_fixed_slots_and_queues_the_rest(started) -> None:
    handler = EchoHandler()
    s = started(StreamingScheduler(handler, slots=2))
    for rid in ("a", "b", "c"):
        s.inbox.put(new(rid))
        s.inbox.put(IncomingMessage(rid, "stream_chunk", {"v": rid}))
    got = collect(s, lambda g: sum(o.type == "stream" for o in g) >= 2)
    assert {o.request_id for o in got} == {"a", "b"} and s.load()["queue"] == 1  # c waits
    s.inbox.put(IncomingMessage("a", "stream_done", {}))
    got = collect(s, lambda g: any(o.request_id == "c" for o in g))
    assert handler.resets == [0]  # a's slot was reset before c took it
    assert s.slots_used == 2


def test_streaming_steps_every_due_request_in_one_batch(started) -> None:
    batches: list[int] = []
    handler = EchoHandler()
    step = handler.step
    handler.step = lambda states: (batches.append(len(states)), step(states))[1]  # type: ignore[method-assign]
    s = StreamingScheduler(handler, slots=4)
    for rid in "abcd":
        s.inbox.put(new(rid))
        s.inbox.put(IncomingMessage(rid, "stream_chunk", {}))
    started(s)
    collect(s, lambda g: len(g) >= 4)
    assert batches[0] == 4


def test_streaming_abort_frees_the_slot_for_the_next(started) -> None:
    handler = EchoHandler()
    s = started(StreamingScheduler(handler, slots=1))
    for i in range(200):
        s.inbox.put(new(f"r{i}"))
        s.inbox.put(IncomingMessage(f"r{i}", "stream_chunk", {}))
        s.abort(f"r{i}")
    s.abort("never-seen")
    s.inbox.put(new("last", oneshot=True))
    collect(s, ends(1))
    deadline = time.monotonic() + 5
    while s.slots_used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.slots_used == 0 and s.load()["queue"] == 0 and s.load()["running"] == 0


def test_streaming_needs_a_slot() -> None:
    with pytest.raises(ValueError):
        StreamingScheduler(EchoHandler(), slots=0)


def test_streaming_chunks_come_out_in_order_then_the_result(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=1, info={"model": "echo"}))
    assert s.info == {"slots": 1, "model": "echo"}
    s.inbox.put(new("r"))
    for i in range(20):
        s.inbox.put(chunk("r", i=i))
    s.inbox.put(done("r"))
    got = collect(s, ends(1))
    assert [o.data["i"] for o in got if o.type == "stream"] == list(range(20))
    assert got[-1] == OutgoingMessage("r", "result", {"chunks": 20})
    wait_for(lambda: s.slots_used == 0)


def test_streaming_chunks_sent_while_waiting_are_kept_for_the_request(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=1))
    s.inbox.put(new("first"))
    s.inbox.put(new("second"))
    s.inbox.put(chunk("second", v=1))
    s.inbox.put(chunk("second", v=2))
    s.inbox.put(done("second"))
    wait_for(lambda: s.load()["queue"] == 1.0)
    s.inbox.put(done("first"))
    got = collect(s, has("second"))
    second = [o for o in got if o.request_id == "second"]
    assert [o.data for o in second] == [{"v": 1}, {"v": 2}, {"chunks": 2}]


def test_streaming_slotless_requests_pass_a_full_house(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=1))
    s.inbox.put(new("holder"))
    s.inbox.put(new("waiter"))
    s.inbox.put(new("clip", oneshot=True, text="hi"))
    got = collect(s, has("clip"))
    assert [o.type for o in got if o.request_id == "clip"] == ["stream", "result"]
    assert s.load()["queue"] == 1.0 and s.slots_used == 1


def test_streaming_a_duplicate_new_request_is_ignored(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=2))
    s.inbox.put(new("r"))
    s.inbox.put(new("r"))
    s.inbox.put(done("r"))
    got = collect(s, ends(1))
    assert got == [OutgoingMessage("r", "result", {"chunks": 0})]
    wait_for(lambda: s.slots_used == 0)
    assert s.load()["queue"] == 0.0


def test_streaming_messages_for_unknown_requests_are_ignored(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=1))
    s.inbox.put(chunk("ghost", v=1))
    s.inbox.put(done("ghost"))
    s.inbox.put(new("real", oneshot=True))
    got = collect(s, ends(1))
    assert {o.request_id for o in got} == {"real"}


class Faulty(EchoHandler):
    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.closed = 0

    def open(self, slot, data):
        if self.where == "open" and data.get("bad"):
            raise EngineFailure("cannot open")
        return super().open(slot, data)

    def chunk(self, state, data):
        if self.where == "chunk" and data.get("bad"):
            raise EngineFailure("bad chunk")
        super().chunk(state, data)

    def step(self, states):
        if self.where == "step":
            raise EngineFailure("step failed")
        return super().step(states)

    def close(self, state):
        self.closed += 1
        super().close(state)


def test_streaming_a_failed_open_is_an_error_and_frees_nothing_it_never_took(started) -> None:
    s = started(StreamingScheduler(Faulty("open"), slots=1))
    s.inbox.put(new("bad", bad=True))
    s.inbox.put(new("good"))
    s.inbox.put(done("good"))
    got = collect(s, ends(2))
    assert [(o.request_id, o.type) for o in got if o.type != "stream"] == [
        ("bad", "error"),
        ("good", "result"),
    ]
    assert got[0].data["code"] == "engine_error"
    wait_for(lambda: s.slots_used == 0)


def test_streaming_a_failed_chunk_ends_the_request_and_frees_its_slot(started) -> None:
    handler = Faulty("chunk")
    s = started(StreamingScheduler(handler, slots=1))
    s.inbox.put(new("r"))
    s.inbox.put(chunk("r", bad=True))
    s.inbox.put(chunk("r", v=2))  # after the error: nothing more for r
    got = collect(s, ends(1))
    wait_for(lambda: s.slots_used == 0)
    got += s.outbox.drain()
    assert [o.type for o in got] == ["error"]
    assert handler.closed == 1 and handler.resets == [0]


def test_streaming_a_failed_step_fails_every_due_request(started) -> None:
    handler = Faulty("step")
    s = StreamingScheduler(handler, slots=3)
    for rid in "abc":
        s.inbox.put(new(rid))
        s.inbox.put(chunk(rid))
    started(s)
    got = collect(s, ends(3))
    assert sorted(o.request_id for o in got) == ["a", "b", "c"]
    assert all(o.type == "error" for o in got)
    wait_for(lambda: s.slots_used == 0)
    assert handler.closed == 3


def test_streaming_abort_of_a_waiting_request_drops_it(started) -> None:
    s = started(StreamingScheduler(EchoHandler(), slots=1))
    s.inbox.put(new("holder"))
    s.inbox.put(new("waiter"))
    s.inbox.put(chunk("waiter", v=1))
    wait_for(lambda: s.load()["queue"] == 1.0)
    s.abort("waiter")
    wait_for(lambda: s.load()["queue"] == 0.0)
    s.inbox.put(done("holder"))
    got = collect(s, has("holder"))
    assert all(o.request_id == "holder" for o in got)


def test_streaming_load_includes_the_handler_figures(started) -> None:
    class WithLoad(EchoHandler):
        def load(self):
            return {"model_queue": 4.0}

    s = started(StreamingScheduler(WithLoad(), slots=2))
    load = s.load()
    assert load["model_queue"] == 4.0 and load["slots_total"] == 2.0 and load["slots_used"] == 0.0


def test_streaming_stop_closes_active_states_and_emits_nothing_more() -> None:
    handler = Faulty("none")
    s = StreamingScheduler(handler, slots=2)
    s.start()
    s.inbox.put(new("a"))
    s.inbox.put(new("b"))
    wait_for(lambda: s.slots_used == 2)
    s.stop()
    assert handler.closed == 2 and s.slots_used == 0
    s.inbox.put(chunk("a", v=1))
    assert s.outbox.drain() == []
    s.stop()
    s.outbox.close()
