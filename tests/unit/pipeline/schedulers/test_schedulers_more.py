"""The scheduler contract, further: each scheduler with fake compute, from inbox to outbox.

Promises checked: every accepted request ends with exactly one result or error (unless aborted);
stream messages come before the result, in order; abort of an unknown or finished request does
nothing; after ``stop`` nothing more reaches the outbox.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.builtin import CountRunner, EchoHandler
from omnivox.pipeline.scheduler import (
    IncomingMessage,
    OutgoingMessage,
    Scheduler,
    SchedulerOutbox,
    Tombstones,
    error_message,
)
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler


def collect(s: Scheduler, until: Callable[[list[OutgoingMessage]], bool], timeout: float = 10.0):
    got: list[OutgoingMessage] = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, f"timed out with {got}"
        got.extend(s.outbox.drain())
        time.sleep(0.002)
    return got


def ends(n: int):
    return lambda got: sum(o.type in ("result", "error") for o in got) >= n


def has(rid: str, kind: str = "result"):
    return lambda got: any(o.request_id == rid and o.type == kind for o in got)


def new(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "new_request", data)


def chunk(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "stream_chunk", data)


def done(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "stream_done", data)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.002)


@pytest.fixture
def started() -> Iterator[Callable[[Scheduler], Scheduler]]:
    made: list[Scheduler] = []

    def start(s: Scheduler) -> Scheduler:
        s.start()
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()
        s.outbox.close()


# ---- the shared pieces


def test_outbox_drain_takes_everything_and_clears_the_signal() -> None:
    import select

    box = SchedulerOutbox()
    try:
        assert box.drain() == []
        assert select.select([box.fileno()], [], [], 0)[0] == []
        box.put(OutgoingMessage("a", "result", {}))
        box.put(OutgoingMessage("b", "stream", {"x": 1}))
        assert select.select([box.fileno()], [], [], 0)[0] == [box.fileno()]  # readable: wake up
        got = box.drain()
        assert [o.request_id for o in got] == ["a", "b"]
        assert select.select([box.fileno()], [], [], 0)[0] == []
        assert box.drain() == []
    finally:
        box.close()
        box.close()  # twice is harmless


def test_outbox_survives_more_puts_than_the_pipe_holds() -> None:
    box = SchedulerOutbox()
    try:
        for i in range(100_000):
            box.put(OutgoingMessage(str(i), "stream", {}))
        assert len(box.drain()) == 100_000
    finally:
        box.close()


def test_tombstones_remember_a_bounded_number_of_ids() -> None:
    t = Tombstones(keep=3)
    for rid in "abcd":
        t.add(rid)
    assert "a" not in t and all(r in t for r in "bcd")
    t.add("b")  # re-adding refreshes it
    t.add("e")
    assert "b" in t and "c" not in t
    assert 5 not in t


def test_error_message_carries_the_code_and_the_message() -> None:
    out = error_message("r", EngineFailure("broken model"))
    assert out == OutgoingMessage("r", "error", {"code": "engine_error", "message": "broken model"})
    assert error_message("r", KeyError("k")).data["code"] == "internal_error"


# ---- SimpleScheduler


def test_simple_needs_exactly_one_compute() -> None:
    with pytest.raises(ValueError):
        SimpleScheduler()
    with pytest.raises(ValueError):
        SimpleScheduler(lambda v: v, batch_compute=lambda vs: vs)


def test_simple_streams_a_generator_then_its_return_value(started) -> None:
    def compute(values):
        for i in range(values["n"]):
            yield {"i": i}
        return {"total": values["n"]}

    s = started(SimpleScheduler(compute))
    s.inbox.put(new("r", n=3))
    got = collect(s, ends(1))
    assert [(o.type, o.data) for o in got] == [
        ("stream", {"i": 0}),
        ("stream", {"i": 1}),
        ("stream", {"i": 2}),
        ("result", {"total": 3}),
    ]


def test_simple_a_generator_without_return_value_ends_with_an_empty_result(started) -> None:
    s = started(SimpleScheduler(lambda v: iter([{"a": 1}])))
    s.inbox.put(new("r"))
    got = collect(s, ends(1))
    assert got[-1] == OutgoingMessage("r", "result", {})
    assert s.load()["done"] == 1.0


def test_simple_an_error_midway_through_a_stream_is_one_error(started) -> None:
    def compute(values):
        yield {"a": 1}
        raise EngineFailure("halfway")

    s = started(SimpleScheduler(compute))
    s.inbox.put(new("r"))
    got = collect(s, ends(1))
    assert [o.type for o in got] == ["stream", "error"]
    assert got[-1].data == {"code": "engine_error", "message": "halfway"}


def test_simple_streamed_input_is_computed_at_its_end_with_its_chunks(started) -> None:
    seen: list[dict] = []
    s = started(SimpleScheduler(lambda v: (seen.append(v), {"n": len(v["chunks"])})[1]))
    s.inbox.put(new("r", streaming=True))
    s.inbox.put(chunk("r", x=1))
    s.inbox.put(chunk("r", x=2))
    s.inbox.put(done("r", final=True))
    got = collect(s, ends(1))
    assert got == [OutgoingMessage("r", "result", {"n": 2})]
    assert seen == [{"final": True, "chunks": [{"x": 1}, {"x": 2}]}]
    assert s.load()["streams"] == 0.0


def test_simple_abort_drops_a_half_streamed_input(started) -> None:
    s = started(SimpleScheduler(lambda v: {"n": len(v.get("chunks", []))}))
    s.inbox.put(new("gone", streaming=True))
    s.inbox.put(chunk("gone", x=1))
    wait_for(lambda: s.load()["streams"] == 1.0)
    s.abort("gone")
    assert s.load()["streams"] == 0.0
    s.inbox.put(done("gone"))
    s.inbox.put(new("next"))
    got = collect(s, has("next"))
    assert all(o.request_id == "next" for o in got)


def test_simple_abort_of_unknown_or_finished_requests_is_harmless(started) -> None:
    s = started(SimpleScheduler(lambda v: {"ok": v["i"]}))
    s.abort("never-seen")
    s.inbox.put(new("a", i=1))
    collect(s, ends(1))
    s.abort("a")
    s.abort("a")
    s.inbox.put(new("b", i=2))
    got = collect(s, ends(1))
    assert got == [OutgoingMessage("b", "result", {"ok": 2})]


def test_simple_aborted_before_it_runs_produces_nothing(started) -> None:
    gate = threading.Event()

    def compute(values):
        if values.get("block"):
            gate.wait(10)
        return values

    s = started(SimpleScheduler(compute))
    s.inbox.put(new("blocker", block=True))
    s.inbox.put(new("victim"))
    s.abort("victim")
    gate.set()
    s.inbox.put(new("after"))
    got = collect(s, has("after"))
    assert {o.request_id for o in got} == {"blocker", "after"}


def test_simple_abort_stops_a_running_generator(started) -> None:
    produced: list[tuple[str, int]] = []
    release = threading.Event()

    def compute(values):
        for i in range(values.get("n", 1000)):
            produced.append((values["id"], i))
            yield {"i": i}
            if i == 0:
                release.wait(10)

    s = started(SimpleScheduler(compute))
    s.inbox.put(new("r", id="r"))
    collect(s, lambda g: len(g) >= 1)
    s.abort("r")
    release.set()
    s.inbox.put(new("next", id="next", n=2))
    got = collect(s, has("next"))
    assert not any(o.request_id == "r" for o in got)
    assert [i for rid, i in produced if rid == "r"] in ([0], [0, 1])  # the generator was left at once


def test_simple_batch_compute_of_the_wrong_length_fails_every_request(started) -> None:
    s = SimpleScheduler(batch_compute=lambda items: items[:1], max_batch=4)
    for rid in "abc":
        s.inbox.put(new(rid))
    started(s)
    got = collect(s, ends(3))
    assert sorted(o.request_id for o in got) == ["a", "b", "c"]
    assert all(o.type == "error" and o.data["code"] == "internal_error" for o in got)


def test_simple_batch_compute_error_fails_the_batch(started) -> None:
    def boom(items):
        raise EngineFailure("gpu fell over")

    s = SimpleScheduler(batch_compute=boom, max_batch=2)
    s.inbox.put(new("a"))
    s.inbox.put(new("b"))
    started(s)
    got = collect(s, ends(2))
    assert {(o.request_id, o.data["code"]) for o in got} == {("a", "engine_error"), ("b", "engine_error")}


def test_simple_batches_never_exceed_max_batch(started) -> None:
    sizes: list[int] = []

    def batch(items):
        sizes.append(len(items))
        return [{"i": v["i"]} for v in items]

    s = SimpleScheduler(batch_compute=batch, max_batch=3)
    for i in range(7):
        s.inbox.put(new(f"r{i}", i=i))
    started(s)
    got = collect(s, ends(7))
    assert sorted(o.data["i"] for o in got) == list(range(7))
    assert max(sizes) <= 3 and sum(sizes) == 7
    assert s.load()["batch_items"] == 7.0 and s.load()["batches"] == float(len(sizes))


def test_simple_info_is_a_copy() -> None:
    info = {"model": "m"}
    s = SimpleScheduler(lambda v: v, info=info)
    s.info["x"] = 1
    assert info == {"model": "m"}
    s.outbox.close()


def test_simple_nothing_reaches_the_outbox_after_stop() -> None:
    gate = threading.Event()
    entered = threading.Event()

    def compute(values):
        entered.set()
        gate.wait(10)
        return {"late": True}

    s = SimpleScheduler(compute)
    s.start()
    s.inbox.put(new("r"))
    assert entered.wait(10)
    stopper = threading.Thread(target=s.stop)
    stopper.start()
    wait_for(lambda: not s._running)
    gate.set()
    stopper.join(10)
    assert s.outbox.drain() == []
    s.stop()  # twice is safe
    s.outbox.close()


# ---- StreamingScheduler


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


# ---- ARScheduler


def test_ar_info_and_max_running_floor() -> None:
    s = ARScheduler(CountRunner(), max_running=0, info={"model": "count"})
    assert s.max_running == 1 and s.info == {"max_running": 1, "model": "count"}
    s.outbox.close()


def test_ar_streams_every_token_before_its_result(started) -> None:
    s = started(ARScheduler(CountRunner(), max_running=2))
    s.inbox.put(new("r", tokens=4))
    got = collect(s, ends(1))
    assert [(o.type, o.data) for o in got] == [
        ("stream", {"token": 0}),
        ("stream", {"token": 1}),
        ("stream", {"token": 2}),
        ("stream", {"token": 3}),
        ("result", {"tokens": [0, 1, 2, 3]}),
    ]


def test_ar_never_runs_more_than_max_running(started) -> None:
    runner = CountRunner()
    s = ARScheduler(runner, max_running=2)
    for i in range(5):
        s.inbox.put(new(f"r{i}", tokens=3))
    started(s)
    got = collect(s, ends(5))
    assert max(runner.batches) <= 2
    assert sorted(o.request_id for o in got if o.type == "result") == [f"r{i}" for i in range(5)]
    wait_for(lambda: runner.live == 0)
    load = s.load()
    assert load["queue"] == 0.0 and load["running"] == 0.0 and load["kv_states"] == 0.0
    assert load["batch_items"] == 15.0


def test_ar_a_failed_prefill_is_one_error_and_the_rest_go_on(started) -> None:
    runner = CountRunner()
    s = ARScheduler(runner, max_running=4)
    s.inbox.put(new("bad", tokens=0))  # CountRunner refuses tokens < 1
    s.inbox.put(new("good", tokens=2))
    started(s)
    got = collect(s, ends(2))
    errors = [o for o in got if o.type == "error"]
    assert [o.request_id for o in errors] == ["bad"] and errors[0].data["code"] == "internal_error"
    assert has("good")(got)
    wait_for(lambda: runner.live == 0)


class BrokenDecode(CountRunner):
    def decode(self, states):
        raise EngineFailure("decode failed")


def test_ar_a_failed_decode_fails_and_releases_every_running_request(started) -> None:
    runner = BrokenDecode()
    s = ARScheduler(runner, max_running=4)
    s.inbox.put(new("a", tokens=3))
    s.inbox.put(new("b", tokens=3))
    started(s)
    got = collect(s, ends(2))
    assert sorted((o.request_id, o.type) for o in got) == [("a", "error"), ("b", "error")]
    wait_for(lambda: runner.live == 0)
    assert s.live_states == 0


class BrokenAccept(CountRunner):
    def accept(self, state, token):
        if state.goal == 99:
            raise EngineFailure("bad token")
        return super().accept(state, token)


def test_ar_a_failed_accept_fails_that_request_only(started) -> None:
    runner = BrokenAccept()
    s = ARScheduler(runner, max_running=4)
    s.inbox.put(new("bad", tokens=99))
    s.inbox.put(new("good", tokens=2))
    started(s)
    got = collect(s, ends(2))
    assert [o.type for o in got if o.request_id == "bad"] == ["error"]
    assert [o.type for o in got if o.request_id == "good"] == ["stream", "stream", "result"]
    wait_for(lambda: runner.live == 0)


def test_ar_ignores_stream_input(started) -> None:
    s = started(ARScheduler(CountRunner()))
    s.inbox.put(chunk("r", x=1))
    s.inbox.put(done("r"))
    s.inbox.put(new("real", tokens=1))
    got = collect(s, ends(1))
    assert {o.request_id for o in got} == {"real"}


def test_ar_abort_of_unknown_or_finished_is_harmless_and_a_later_one_runs(started) -> None:
    runner = CountRunner()
    s = started(ARScheduler(runner))
    s.abort("nobody")
    s.inbox.put(new("a", tokens=1))
    collect(s, ends(1))
    s.abort("a")
    s.inbox.put(new("b", tokens=2))
    got = collect(s, ends(1))
    assert [o.request_id for o in got] == ["b", "b", "b"]


def test_ar_stop_releases_running_states_and_emits_nothing_more() -> None:
    runner = CountRunner()
    s = ARScheduler(runner, max_running=2)
    s.start()
    s.inbox.put(new("long", tokens=10_000_000))
    wait_for(lambda: runner.live == 1)
    s.stop()
    assert runner.live == 0 and s.live_states == 0
    s.outbox.drain()  # what came before stop
    s.inbox.put(new("late", tokens=1))
    assert s.outbox.drain() == []
    s.stop()
    s.outbox.close()


# ---- ParallelScheduler


def test_parallel_result_and_streams(started) -> None:
    def run(data, stop, emit):
        for i in range(3):
            emit({"i": i})
        return {"done": data["x"]}

    s = started(ParallelScheduler(run, slots=1, info={"model": "m"}))
    assert s.info == {"slots": 1, "model": "m"}
    s.inbox.put(new("r", x=5))
    got = collect(s, ends(1))
    assert [(o.type, o.data) for o in got] == [
        ("stream", {"i": 0}),
        ("stream", {"i": 1}),
        ("stream", {"i": 2}),
        ("result", {"done": 5}),
    ]
    wait_for(lambda: s.load()["done"] == 1.0)


def test_parallel_an_error_is_one_error_message(started) -> None:
    def run(data, stop, emit):
        raise EngineFailure("server down")

    s = started(ParallelScheduler(run, slots=2))
    s.inbox.put(new("r"))
    (out,) = collect(s, ends(1))
    assert out.type == "error" and out.data == {"code": "engine_error", "message": "server down"}


def test_parallel_ignores_stream_input_and_duplicate_ids(started) -> None:
    gate = threading.Event()
    calls: list[str] = []

    def run(data, stop, emit):
        calls.append(data["tag"])
        gate.wait(10)
        return {"tag": data["tag"]}

    s = started(ParallelScheduler(run, slots=2))
    s.inbox.put(new("r", tag="first"))
    s.inbox.put(chunk("r", tag="chunk"))
    s.inbox.put(new("r", tag="dup"))
    wait_for(lambda: calls == ["first"] and s.inbox.qsize() == 0)
    gate.set()
    got = collect(s, ends(1))
    assert got == [OutgoingMessage("r", "result", {"tag": "first"})]


def test_parallel_an_aborted_request_never_starts(started) -> None:
    calls: list[str] = []
    s = started(ParallelScheduler(lambda d, stop, emit: (calls.append(d["i"]), {})[1], slots=1))
    s.abort("r")
    s.inbox.put(new("r", i="r"))
    s.inbox.put(new("s", i="s"))
    got = collect(s, ends(1))
    assert [o.request_id for o in got] == ["s"] and calls == ["s"]


def test_parallel_abort_sets_the_stop_of_a_running_request(started) -> None:
    stopped = threading.Event()

    def run(data, stop, emit):
        if data.get("quick"):
            return {"quick": True}
        emit({"started": True})
        if stop.wait(10):
            stopped.set()
        return {"finished": True}

    s = started(ParallelScheduler(run, slots=1))
    s.inbox.put(new("r"))
    collect(s, lambda g: len(g) >= 1)
    s.abort("r")
    assert stopped.wait(10)
    s.inbox.put(new("after", quick=True))
    got = collect(s, has("after"))
    assert not any(o.request_id == "r" for o in got)


def test_parallel_load_and_extra_load(started) -> None:
    gate = threading.Event()
    s = ParallelScheduler(lambda d, stop, emit: (gate.wait(10), {})[1], slots=2)
    s.extra_load = lambda: {"server_queue": 3.0}
    started(s)
    for i in range(2):
        s.inbox.put(new(f"r{i}"))
    wait_for(lambda: s.load()["running"] == 2.0)
    load = s.load()
    assert load["server_queue"] == 3.0 and load["slots_total"] == 2.0 and load["slots_used"] == 2.0
    assert s.peak == 2
    gate.set()
    collect(s, ends(2))
    wait_for(lambda: s.load()["running"] == 0.0)
    assert s.load()["done"] == 2.0


def test_parallel_stop_sets_every_stop_and_nothing_more_is_emitted() -> None:
    seen_stop = threading.Event()

    def run(data, stop, emit):
        if stop.wait(10):
            seen_stop.set()
        return {"late": True}

    s = ParallelScheduler(run, slots=1)
    s.start()
    s.inbox.put(new("r"))
    wait_for(lambda: s.load()["running"] == 1.0)
    s.stop()
    assert seen_stop.is_set()
    assert s.outbox.drain() == []
    s.outbox.close()
