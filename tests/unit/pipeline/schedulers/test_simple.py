"""``SimpleScheduler`` with fake compute, from inbox to outbox: batches, streamed input and
generators, aborts, failures, and nothing after ``stop``."""

from __future__ import annotations

import threading

import pytest

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.scheduler import (
    OutgoingMessage,
)
from omnivox.pipeline.schedulers.simple import SimpleScheduler

from .harness import chunk, collect, done, ends, has, new, wait_for


def test_simple_computes_each_request_or_batches_what_waits(started) -> None:
    s = started(SimpleScheduler(lambda v: {"y": v["x"] * 2}))
    for i in range(3):
        s.inbox.put(new(f"r{i}", x=i))
    got = collect(s, ends(3))
    assert sorted((o.request_id, o.data["y"]) for o in got) == [("r0", 0), ("r1", 2), ("r2", 4)]

    sizes: list[int] = []

    def batch(items):
        sizes.append(len(items))
        return [{"y": v["x"]} for v in items]

    b = SimpleScheduler(batch_compute=batch, max_batch=8)
    for i in range(5):
        b.inbox.put(new(f"r{i}", x=i))
    started(b)
    collect(b, ends(5))
    assert sizes == [5]  # everything waiting went in one call


def test_simple_reports_a_failure_as_an_error_message(started) -> None:
    def boom(v):
        raise ValueError("no")

    s = started(SimpleScheduler(boom))
    s.inbox.put(new("r"))
    (out,) = collect(s, ends(1))
    assert out.type == "error" and out.data["code"] == "internal_error"


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
