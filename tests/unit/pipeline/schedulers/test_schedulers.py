"""The schedulers on the CPU with fake models and no sockets: the contract's promises."""

from __future__ import annotations

import threading
import time

import pytest

from omnivox.pipeline.builtin import CountRunner, EchoHandler
from omnivox.pipeline.scheduler import IncomingMessage, OutgoingMessage, Scheduler
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler


def outputs(scheduler: Scheduler, until, timeout: float = 5.0) -> list[OutgoingMessage]:
    """Everything the outbox gives until ``until(outputs)`` holds."""
    got: list[OutgoingMessage] = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, f"timed out with {got}"
        got.extend(scheduler.outbox.drain())
        time.sleep(0.002)
    return got


def ended(n: int):
    return lambda got: sum(o.type in ("result", "error") for o in got) >= n


def new(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "new_request", data)


@pytest.fixture
def started():
    made: list[Scheduler] = []

    def start(s: Scheduler) -> Scheduler:
        s.start()
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()


def test_simple_computes_each_request_or_batches_what_waits(started) -> None:
    s = started(SimpleScheduler(lambda v: {"y": v["x"] * 2}))
    for i in range(3):
        s.inbox.put(new(f"r{i}", x=i))
    got = outputs(s, ended(3))
    assert sorted((o.request_id, o.data["y"]) for o in got) == [("r0", 0), ("r1", 2), ("r2", 4)]

    sizes: list[int] = []

    def batch(items):
        sizes.append(len(items))
        return [{"y": v["x"]} for v in items]

    b = SimpleScheduler(batch_compute=batch, max_batch=8)
    for i in range(5):
        b.inbox.put(new(f"r{i}", x=i))
    started(b)
    outputs(b, ended(5))
    assert sizes == [5]  # everything waiting went in one call


def test_simple_reports_a_failure_as_an_error_message(started) -> None:
    def boom(v):
        raise ValueError("no")

    s = started(SimpleScheduler(boom))
    s.inbox.put(new("r"))
    (out,) = outputs(s, ended(1))
    assert out.type == "error" and out.data["code"] == "internal_error"


def test_streaming_holds_fixed_slots_and_queues_the_rest(started) -> None:
    handler = EchoHandler()
    s = started(StreamingScheduler(handler, slots=2))
    for rid in ("a", "b", "c"):
        s.inbox.put(new(rid))
        s.inbox.put(IncomingMessage(rid, "stream_chunk", {"v": rid}))
    got = outputs(s, lambda g: sum(o.type == "stream" for o in g) >= 2)
    assert {o.request_id for o in got} == {"a", "b"} and s.load()["queue"] == 1  # c waits
    s.inbox.put(IncomingMessage("a", "stream_done", {}))
    got = outputs(s, lambda g: any(o.request_id == "c" for o in g))
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
    outputs(s, lambda g: len(g) >= 4)
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
    outputs(s, ended(1))
    deadline = time.monotonic() + 5
    while s.slots_used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.slots_used == 0 and s.load()["queue"] == 0 and s.load()["running"] == 0


def test_ar_batches_decode_steps_across_requests_that_join_and_leave(started) -> None:
    runner = CountRunner()
    s = ARScheduler(runner, max_running=4)
    s.inbox.put(new("long", tokens=6))
    s.inbox.put(new("short", tokens=2))
    started(s)
    got = outputs(s, ended(2))
    streams = {
        rid: [o.data["token"] for o in got if o.request_id == rid and o.type == "stream"]
        for rid in ("long", "short")
    }
    assert streams == {"long": [0, 1, 2, 3, 4, 5], "short": [0, 1]}
    assert runner.batches[:2] == [2, 2] and 1 in runner.batches  # together, then the long one alone
    assert runner.live == 0


def test_ar_abort_releases_the_kv_state(started) -> None:
    runner = CountRunner()
    s = started(ARScheduler(runner, max_running=8))
    for i in range(200):
        s.inbox.put(new(f"r{i}", tokens=10_000))
        s.abort(f"r{i}")
    s.inbox.put(new("done", tokens=1))
    outputs(s, ended(1))
    deadline = time.monotonic() + 5
    while runner.live and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.live == 0 and s.live_states == 0


def test_parallel_runs_up_to_its_slots_and_abort_stops_one(started) -> None:
    gate = threading.Event()
    running = []

    def run(data, stop, emit):
        running.append(data["i"])
        emit({"started": data["i"]})
        while not (gate.is_set() or stop.is_set()):
            time.sleep(0.005)
        return {"i": data["i"]}

    s = started(ParallelScheduler(run, slots=2))
    for i in range(3):
        s.inbox.put(new(f"r{i}", i=i))
    outputs(s, lambda g: len(g) >= 2)
    assert sorted(running) == [0, 1]  # the third waits for a slot
    s.abort("r0")
    got = outputs(s, lambda g: any(o.request_id == "r2" for o in g))
    gate.set()
    got += outputs(s, ended(2))
    assert not any(o.request_id == "r0" and o.type == "result" for o in got)
