"""``ARScheduler`` with the builtin counting runner: continuous batching of decode steps,
failures of prefill, decode or accept, aborts, and nothing after ``stop``."""

from __future__ import annotations

import time

from omnivox.core.errors import EngineFailure
from omnivox.pipeline.builtin import CountRunner
from omnivox.pipeline.schedulers.ar import ARScheduler

from .harness import chunk, collect, done, ends, has, new, wait_for


def test_ar_batches_decode_steps_across_requests_that_join_and_leave(started) -> None:
    runner = CountRunner()
    s = ARScheduler(runner, max_running=4)
    s.inbox.put(new("long", tokens=6))
    s.inbox.put(new("short", tokens=2))
    started(s)
    got = collect(s, ends(2))
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
    collect(s, ends(1))
    deadline = time.monotonic() + 5
    while runner.live and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.live == 0 and s.live_states == 0


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
