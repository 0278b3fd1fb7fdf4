"""Reading the scheduler script's replies back: worker hashes, assignments, queue places and waits."""

from __future__ import annotations

import msgspec
import pytest

from omnivox.gateway.cluster.codec import (
    able,
    assignment,
    durations,
    event_assignment,
    pairs,
    queue_places,
    seq_places,
    worker_view,
)
from omnivox.gateway.scheduling.eta import BASELINE_S
from omnivox.gateway.scheduling.store import Assignment
from omnivox.protocol.control.workers import Capabilities, WorkerState

NOW_MS = 1_000_000


def test_pairs_reads_a_flat_hgetall_reply() -> None:
    assert pairs(["a", "1", "b", "2"]) == {"a": "1", "b": "2"}
    assert pairs([]) == {}


def test_able_lists_the_matched_capabilities_sorted_and_fenced_by_commas() -> None:
    assert able(Capabilities()) == ",streaming,"
    assert able(Capabilities(streaming=True, duplex=True, realtime=True)) == ",duplex,realtime,streaming,"
    # audio_in/vision are no task's capability: they never show
    assert able(Capabilities(streaming=False, audio_in=True, vision=True)) == ","


def test_a_minimal_worker_hash_reads_with_defaults() -> None:
    view = worker_view("w1", {"url": "http://w:1", "state": "IDLE"}, NOW_MS)
    assert view.worker_id == "w1" and view.url == "http://w:1"
    assert view.state is WorkerState.IDLE
    assert view.capabilities == Capabilities()
    assert (view.cached_hash, view.cache_age_s, view.ticket_id, view.task_type) == (None, None, None, None)
    assert (view.busy_for_s, view.error, view.monitor) == (None, None, None)
    assert (view.sessions_served, view.kv_length, view.epoch) == (0, 0, 0)
    assert view.voices == () and view.problems == ()


def test_a_full_worker_hash_reads_every_field() -> None:
    h = {
        "url": "http://w:2",
        "state": "DUPLEX_ACTIVE",
        "engine": "mock",
        "caps": Capabilities(duplex=True).model_dump_json(),
        "cached": "abc",
        "cache_ms": str(NOW_MS - 2500),
        "ticket": "t1",
        "task": "audio_duplex",
        "busy_ms": str(NOW_MS - 1234),
        "served": "7",
        "kv": "99",
        "voices": '["a", "b"]',
        "error": "",
        "problems": '["llm down"]',
        "epoch": "4",
    }
    view = worker_view("w2", h, NOW_MS, monitor="gw-b")
    assert view.state is WorkerState.DUPLEX_ACTIVE and view.engine == "mock"
    assert view.capabilities.duplex and view.cached_hash == "abc"
    assert view.cache_age_s == 2.5 and view.busy_for_s == 1.234
    assert (view.ticket_id, view.task_type) == ("t1", "audio_duplex")
    assert (view.sessions_served, view.kv_length, view.epoch) == (7, 99, 4)
    assert view.voices == ("a", "b") and view.problems == ("llm down",)
    assert view.error is None  # an empty error is no error
    assert view.monitor == "gw-b"


def test_a_cache_age_needs_both_a_hash_and_its_time() -> None:
    base = {"url": "u", "state": "IDLE"}
    assert worker_view("w", base | {"cache_ms": str(NOW_MS)}, NOW_MS).cache_age_s is None
    assert worker_view("w", base | {"cached": "h"}, NOW_MS).cache_age_s is None
    assert worker_view("w", base | {"cached": "h", "cache_ms": ""}, NOW_MS).cache_age_s is None


def test_an_unknown_worker_state_is_refused() -> None:
    with pytest.raises(ValueError):
        worker_view("w", {"url": "u", "state": "NAPPING"}, NOW_MS)


def test_a_dispatch_entry_reads_as_an_assignment_its_gateway_and_busy_time() -> None:
    given, gateway, busy = assignment(["t1", "w1", "http://w", "", "realtime", "3", "1", "gw-a", "555"])
    assert given == Assignment("t1", "w1", "http://w", "", "realtime", epoch=3, cache_hit=True)
    assert (gateway, busy) == ("gw-a", 555)
    given, _, _ = assignment(["t", "w", "u", None, "streaming", 0, "0", "g", 0])
    assert given.engine == "" and given.cache_hit is False and given.epoch == 0


def test_a_dispatch_entry_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError):
        assignment(["t1", "w1"])


def test_an_assigned_event_reads_with_its_optional_fields() -> None:
    given, at = event_assignment({"t": "t1", "w": "w1", "u": "u", "q": "streaming", "ep": "2"})
    assert given == Assignment("t1", "w1", "u", "", "streaming", 2, False)
    assert at == 0
    given, at = event_assignment(
        {"t": "t1", "w": "w1", "u": "u", "q": "streaming", "ep": "2", "e": "x", "h": "1", "b": "77"}
    )
    assert given.engine == "x" and given.cache_hit and at == 77


def test_an_assigned_event_without_its_ticket_is_refused() -> None:
    with pytest.raises(KeyError):
        event_assignment({"w": "w1", "u": "u", "q": "streaming", "ep": "2"})


def test_durations_take_measured_means_only_for_task_types_with_samples() -> None:
    model = durations({"streaming:n": "5", "streaming:ema": "4.5", "bogus:n": "9"}, 0.3, 3)
    assert model.expected("streaming") == 4.5
    assert model.samples("streaming") == 5
    assert model.expected("realtime") == BASELINE_S["realtime"]
    assert model.samples("bogus") == 0  # not a task type: ignored
    few = durations({"streaming:n": "2", "streaming:ema": "4.5"}, 0.3, 3)
    assert few.expected("streaming") == BASELINE_S["streaming"]  # under min_samples: the baseline


def _queue_state(queues, workers, eta=()):
    return [NOW_MS, queues, workers, list(eta)]


def test_queue_places_orders_tickets_across_task_types_by_score() -> None:
    queues = [["s1", "30", "s2", "10"], [], [], ["r1", "20"]]  # streaming, audio_duplex, omni, realtime
    places, _ = queue_places(_queue_state(queues, [("IDLE", "", "")]), 0.3, 3)
    assert [(tid, task, pos) for tid, task, pos, _ in places] == [
        ("s2", "streaming", 1),
        ("r1", "realtime", 2),
        ("s1", "streaming", 3),
    ]
    # one idle worker: the first starts now, each next one after those before it
    assert [w for *_, w in places] == [0.0, BASELINE_S["streaming"], BASELINE_S["streaming"] + 120.0]


def test_queue_places_counts_a_busy_workers_remaining_time_and_never_a_negative_wait() -> None:
    eta = ["streaming:n", "3", "streaming:ema", "10"]
    busy_2s = ("BUSY_STREAMING", "streaming", str(NOW_MS - 2000))
    places, _ = queue_places(_queue_state([["s1", "1"], [], [], []], [busy_2s], eta), 0.3, 3)
    assert places == [("s1", "streaming", 1, 8.0)]
    overrun = ("BUSY_STREAMING", "streaming", str(NOW_MS - 60_000))
    places, _ = queue_places(_queue_state([["s1", "1"], [], [], []], [overrun], eta), 0.3, 3)
    assert places[0][3] == 0.0


def test_queue_places_with_no_usable_worker_adds_the_baselines_in_order() -> None:
    workers = [("OFFLINE", "", ""), ("ERROR", "", "")]
    places, plan = queue_places(_queue_state([["a", "1", "b", "2"], [], [], []], workers), 0.3, 3)
    assert [w for *_, w in places] == [0.0, BASELINE_S["streaming"]]
    assert plan.add("streaming") == 2 * BASELINE_S["streaming"]  # the tail's plan goes on from there


def test_queue_places_of_an_empty_queue() -> None:
    places, plan = queue_places(_queue_state([[], [], [], []], [("IDLE", "", "")]), 0.3, 3)
    assert places == [] and plan.add("streaming") == 0.0


def test_queue_places_refuses_a_reply_with_the_wrong_number_of_queues() -> None:
    with pytest.raises(ValueError):
        queue_places(_queue_state([[], []], []), 0.3, 3)


def test_seq_places_finds_this_gateways_tickets_by_sequence_number() -> None:
    packed = msgspec.msgpack.encode([[5, 1], [], [], [3]])
    state = [NOW_MS, packed, [("IDLE", "", ""), ("LOADING", "", "")], []]
    length, places, _ = seq_places(state, {1: "mine-a", 5: "mine-b", 99: "gone"}, 0.3, 3)
    assert length == 3
    # order by seq: 1 (streaming), 3 (realtime), 5 (streaming); two free workers
    assert places == {"mine-a": (1, 0.0), "mine-b": (3, BASELINE_S["streaming"])}
    assert "gone" not in places


def test_seq_places_reads_the_packed_queue_given_as_a_surrogate_escaped_string() -> None:
    packed = msgspec.msgpack.encode([[2], [], [], []]).decode("utf-8", "surrogateescape")
    length, places, _ = seq_places([NOW_MS, packed, [], []], {2: "t"}, 0.3, 3)
    assert length == 1 and places == {"t": (1, 0.0)}
