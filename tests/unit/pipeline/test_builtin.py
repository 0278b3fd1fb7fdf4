"""The model-free stages: each builtin model on each scheduler, and their fake models directly."""

from __future__ import annotations

import threading
import time

import pytest

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.builtin import BUILTIN_MODELS, CountRunner, EchoHandler, _noop, build_builtin
from omnivox.pipeline.scheduler import IncomingMessage, OutgoingMessage, Scheduler
from omnivox.pipeline.schedulers.ar import ARScheduler
from omnivox.pipeline.schedulers.parallel import ParallelScheduler
from omnivox.pipeline.schedulers.simple import SimpleScheduler
from omnivox.pipeline.schedulers.streaming import StreamingScheduler
from omnivox.pipeline.spec import StageSpec


def stage(model: str, scheduler: str, **kw) -> StageSpec:
    return StageSpec.model_validate({"name": "s", "scheduler": scheduler, "model": model, **kw})


def run_one(s: Scheduler, *messages: IncomingMessage, timeout: float = 10.0) -> list[OutgoingMessage]:
    s.start()
    try:
        for m in messages:
            s.inbox.put(m)
        got: list[OutgoingMessage] = []
        deadline = time.monotonic() + timeout
        while not any(o.type in ("result", "error") for o in got):
            assert time.monotonic() < deadline, got
            got.extend(s.outbox.drain())
            time.sleep(0.002)
        return got
    finally:
        s.stop()
        s.outbox.close()


def new(rid: str, **data) -> IncomingMessage:
    return IncomingMessage(rid, "new_request", data)


def test_a_model_that_is_not_builtin_gives_none() -> None:
    assert build_builtin(stage("whisper", "streaming")) is None
    assert set(BUILTIN_MODELS) == {"noop", "echo", "count", "fail"}


@pytest.mark.parametrize(
    ("model", "scheduler", "kind"),
    [
        ("noop", "simple", SimpleScheduler),
        ("noop", "parallel", ParallelScheduler),
        ("noop", "ar", ARScheduler),
        ("noop", "streaming", StreamingScheduler),
        ("echo", "streaming", StreamingScheduler),
        ("count", "ar", ARScheduler),
        ("fail", "simple", SimpleScheduler),
        ("fail", "parallel", ParallelScheduler),
    ],
)
def test_the_scheduler_kind_follows_the_spec(model: str, scheduler: str, kind: type) -> None:
    s = build_builtin(stage(model, scheduler, slots=3, batch=2))
    assert isinstance(s, kind)
    assert s.info["model"] == model
    s.outbox.close()


def test_the_spec_sizes_reach_the_scheduler() -> None:
    ar = build_builtin(stage("count", "ar", batch=5))
    assert isinstance(ar, ARScheduler) and ar.max_running == 5
    par = build_builtin(stage("noop", "parallel", slots=7))
    assert isinstance(par, ParallelScheduler) and par.slots == 7
    sim = build_builtin(stage("noop", "simple", batch=4))
    assert isinstance(sim, SimpleScheduler) and sim.max_batch == 4
    st = build_builtin(stage("echo", "streaming", slots=6))
    assert isinstance(st, StreamingScheduler) and len(st.slots) == 6
    for s in (ar, par, sim, st):
        s.outbox.close()


def test_noop_simple_gives_the_input_back() -> None:
    s = build_builtin(stage("noop", "simple"))
    assert s is not None
    assert run_one(s, new("r", text="hi", n=2)) == [OutgoingMessage("r", "result", {"text": "hi", "n": 2})]


def test_noop_streams_its_input_the_number_of_times_asked() -> None:
    s = build_builtin(stage("noop", "simple", options={"stream": 3}))
    assert s is not None
    got = run_one(s, new("r", x=1))
    assert [(o.type, o.data) for o in got] == [("stream", {"x": 1})] * 3 + [("result", {"x": 1})]


def test_noop_parallel_gives_the_input_back() -> None:
    s = build_builtin(stage("noop", "parallel"))
    assert s is not None
    assert run_one(s, new("r", v=[1, 2])) == [OutgoingMessage("r", "result", {"v": [1, 2]})]


@pytest.mark.parametrize("scheduler", ["simple", "parallel", "ar", "streaming"])
def test_fail_fails_every_request_with_engine_error(scheduler: str) -> None:
    s = build_builtin(stage("fail", scheduler))
    assert s is not None
    (out,) = run_one(s, new("r"))
    assert out.type == "error" and out.data["code"] == "engine_error"


def test_count_on_ar_streams_its_tokens() -> None:
    s = build_builtin(stage("count", "ar"))
    assert s is not None
    got = run_one(s, new("r", tokens=3))
    assert [o.data for o in got] == [{"token": 0}, {"token": 1}, {"token": 2}, {"tokens": [0, 1, 2]}]


def test_echo_on_streaming_says_back_its_chunks() -> None:
    s = build_builtin(stage("echo", "streaming"))
    assert s is not None
    got = run_one(
        s,
        new("r"),
        IncomingMessage("r", "stream_chunk", {"a": 1}),
        IncomingMessage("r", "stream_chunk", {"b": 2}),
        IncomingMessage("r", "stream_done", {}),
    )
    assert [(o.type, o.data) for o in got] == [
        ("stream", {"a": 1}),
        ("stream", {"b": 2}),
        ("result", {"chunks": 2}),
    ]


def test_the_request_sleep_is_cut_short_by_an_abort_on_parallel() -> None:
    s = build_builtin(stage("noop", "parallel", options={"sleep_ms": 60_000}))
    assert isinstance(s, ParallelScheduler)
    s.start()
    try:
        s.inbox.put(new("slow"))
        deadline = time.monotonic() + 10
        while s.load()["running"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        s.abort("slow")
        while s.load()["running"] > 0:  # the 60 s wait ended at the abort
            assert time.monotonic() < deadline
            time.sleep(0.002)
        s.inbox.put(new("quick", sleep_ms=0))
        got: list[OutgoingMessage] = []
        while not got:
            assert time.monotonic() < deadline
            got.extend(s.outbox.drain())
            time.sleep(0.002)
        assert got == [OutgoingMessage("quick", "result", {"sleep_ms": 0})]
    finally:
        s.stop()
        s.outbox.close()


def test_noop_compute_directly() -> None:
    plain = _noop({})
    assert plain({"a": 1}) == {"a": 1}
    streaming = _noop({"stream": 2})
    out = streaming({"a": 1})
    assert not isinstance(out, dict)
    items = []
    try:
        while True:
            items.append(next(out))
    except StopIteration as end:
        assert end.value == {"a": 1}
    assert items == [{"a": 1}, {"a": 1}]


def test_count_runner_directly() -> None:
    runner = CountRunner()
    with pytest.raises(ValueError):
        runner.prefill({"tokens": 0})
    state = runner.prefill({})  # four tokens by default
    assert runner.live == 1
    tokens = []
    finished = False
    while not finished:
        (token,) = runner.decode([state])
        out, finished = runner.accept(state, token)
        tokens.append(out["token"])
    assert tokens == [0, 1, 2, 3] and runner.result(state) == {"tokens": [0, 1, 2, 3]}
    runner.release(state)
    assert runner.live == 0 and runner.batches == [1, 1, 1, 1]


def test_echo_handler_directly() -> None:
    h = EchoHandler()
    assert h.needs_slot({}) and not h.needs_slot({"oneshot": True})
    clip = h.open(None, {"oneshot": True, "x": 1})
    assert h.pending(clip)
    assert h.step([clip]) == [[("stream", {"oneshot": True, "x": 1}), ("result", {"chunks": 1})]]
    state = h.open(0, {})
    assert not h.pending(state)
    h.chunk(state, {"y": 2})
    assert h.step([state]) == [[("stream", {"y": 2})]]
    assert not h.pending(state)
    h.done(state, {})
    assert h.step([state]) == [[("result", {"chunks": 1})]]
    h.chunk(state, {"z": 3})
    h.close(state)
    assert state.chunks == []
    h.reset_slot(0)
    h.reset_slot(2)
    assert h.resets == [0, 2]


def test_fail_raises_an_engine_failure_on_its_own() -> None:
    s = build_builtin(stage("fail", "simple"))
    assert isinstance(s, SimpleScheduler) and s.compute is not None
    with pytest.raises(EngineFailure):
        s.compute({})
    s.outbox.close()


def test_the_parallel_noop_returns_early_when_already_stopped() -> None:
    s = build_builtin(stage("noop", "parallel", options={"sleep_ms": 60_000}))
    assert isinstance(s, ParallelScheduler)
    stop = threading.Event()
    stop.set()
    assert s.run({"x": 1}, stop, lambda v: None) == {}
    assert s.run({"x": 1, "sleep_ms": 0}, threading.Event(), lambda v: None) == {"x": 1, "sleep_ms": 0}
    s.outbox.close()
