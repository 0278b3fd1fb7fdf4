"""``ParallelScheduler`` with fake runs: slots, streams, errors, aborts (the request's ``stop``),
load figures, and nothing after ``stop``."""

from __future__ import annotations

import threading
import time

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.scheduler import (
    OutgoingMessage,
)
from omnivox.pipeline.schedulers.parallel import ParallelScheduler

from .harness import chunk, collect, ends, has, new, wait_for


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
    collect(s, lambda g: len(g) >= 2)
    assert sorted(running) == [0, 1]  # the third waits for a slot
    s.abort("r0")
    got = collect(s, lambda g: any(o.request_id == "r2" for o in g))
    gate.set()
    got += collect(s, ends(2))
    assert not any(o.request_id == "r0" and o.type == "result" for o in got)


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
