"""Cache-aware routing priorities, ETA estimates and the worker state table."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.core.errors import (
    IllegalTransition,
    QueueFull,
    TicketCancelled,
    TooManyWorkers,
    WorkerUnavailable,
)
from omnivox.gateway.scheduling.eta import DurationModel, estimate_waits
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.states import WorkerState, check_transition
from omnivox.protocol.control.workers import Capabilities


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_pool(n: int, *, duplex: bool = False, max_queue: int = 10) -> tuple[WorkerPool, list, Clock]:
    clock = Clock()
    pool = WorkerPool(max_queue_size=max_queue, clock=clock)
    workers = []
    for i in range(n):
        w = pool.add_worker(f"http://w{i}")
        w.capabilities = Capabilities(streaming=True, duplex=duplex)
        pool.report_health(w, WorkerState.IDLE)
        workers.append(w)
    return pool, workers, clock


async def test_route_prefers_hash_match_then_empty_then_lru():
    pool, (a, b, c), _clock = make_pool(3)
    a.cached_hash, a.last_cache_used_at = "h1", 10
    b.cached_hash, b.last_cache_used_at = "h2", 5
    # 1. exact match wins even though an empty worker exists
    t = pool.enqueue("streaming", "h1")
    assert t.future.result() is a and t.cache_hit
    pool.release(a, cached_hash="h1b")
    # 2. no match: the worker without a cache, so no cache is evicted
    t = pool.enqueue("streaming", "zzz")
    assert t.future.result() is c and not t.cache_hit
    pool.release(c, cached_hash="h3")
    c.last_cache_used_at = 50
    # 3. no match, no empty worker: the least recently used cache is evicted
    a.last_cache_used_at = 20
    t = pool.enqueue("streaming", "other")
    assert t.future.result() is b


async def test_duplex_prefers_cacheless_worker_and_needs_capability():
    pool, (a, b), _ = make_pool(2, duplex=True)
    a.cached_hash = "keep-me"
    t = pool.enqueue("audio_duplex")
    assert t.future.result() is b  # streaming cache on a is not evicted
    assert b.state is WorkerState.DUPLEX_ACTIVE
    pool.set_paused(b, True)
    assert b.state is WorkerState.DUPLEX_PAUSED
    pool.release(b)
    assert b.state is WorkerState.IDLE
    pool2, _, _ = make_pool(1, duplex=False)
    with pytest.raises(WorkerUnavailable):
        pool2.enqueue("audio_duplex")


async def test_release_updates_cache_and_dispatches_next_in_order():
    pool, (a,), clock = make_pool(1)
    first = pool.enqueue("streaming", None)
    waiting = [pool.enqueue("streaming", f"h{i}") for i in range(3)]
    assert [pool.position(t.ticket_id)[0] for t in waiting] == [1, 2, 3]
    clock.now += 7
    pool.release(a, cached_hash="after-turn")
    assert first.future.result() is a
    assert waiting[0].future.done() and not waiting[1].future.done()
    assert a.cached_hash == "after-turn" and a.last_cache_used_at == clock.now
    assert pool.durations.samples("streaming") == 1
    assert [pool.position(t.ticket_id)[0] for t in waiting[1:]] == [1, 2]


async def test_queue_full_leaves_nothing_behind():
    pool, (_a,), _ = make_pool(1, max_queue=2)
    pool.enqueue("streaming")
    pool.enqueue("streaming")
    pool.enqueue("streaming")
    with pytest.raises(QueueFull):
        pool.enqueue("streaming")
    assert pool.queue_length == 2


async def test_worker_lost_mid_session_frees_nothing_twice():
    pool, (_a, _b), _ = make_pool(2)
    t1 = pool.enqueue("streaming")
    t2 = pool.enqueue("streaming")
    waiting = pool.enqueue("streaming")
    lost = t1.future.result()
    pool.mark_offline(lost)
    assert lost.state is WorkerState.OFFLINE and lost.ticket_id is None
    pool.release(lost, cached_hash="x")  # the session's late release is a no-op
    assert lost.state is WorkerState.OFFLINE and lost.cached_hash is None
    assert not waiting.future.done()
    pool.report_health(lost, WorkerState.IDLE)  # back: the queue moves
    assert waiting.future.result() is lost
    assert t2.future.result() is not lost


async def test_loading_and_error_workers_are_not_assigned():
    pool, (a,), _ = make_pool(1)
    pool.report_health(a, WorkerState.ERROR, "boom")
    assert a.state is WorkerState.ERROR and a.error == "boom"
    b = pool.add_worker("http://late")
    assert b.state is WorkerState.LOADING
    t = pool.enqueue("streaming")
    assert not t.future.done()
    pool.report_health(b, WorkerState.IDLE)
    assert t.future.result() is b


def test_eta_baselines_then_ema():
    model = DurationModel(alpha=0.3, min_samples=3)
    assert model.expected("streaming") == 20.0
    assert model.expected("audio_duplex") == 120.0
    for s in (10.0, 10.0):
        model.observe("streaming", s)
    assert model.expected("streaming") == 20.0  # not enough samples yet
    model.observe("streaming", 20.0)
    assert model.expected("streaming") == pytest.approx(0.3 * 20 + 0.7 * 10)


def test_eta_heap_over_busy_workers():
    model = DurationModel()
    # two workers free in 5 s and 12 s; streaming turns take 20 s
    waits = estimate_waits([5.0, 12.0], ["streaming"] * 4, model)
    assert waits == [5.0, 12.0, 25.0, 32.0]
    assert estimate_waits([0.0], ["streaming", "omni_duplex", "streaming"], model) == [0.0, 20.0, 110.0]


def test_transition_table_is_checked():
    assert check_transition(WorkerState.IDLE, WorkerState.BUSY_STREAMING) is WorkerState.BUSY_STREAMING
    with pytest.raises(IllegalTransition):
        check_transition(WorkerState.BUSY_STREAMING, WorkerState.DUPLEX_ACTIVE)
    with pytest.raises(IllegalTransition):
        check_transition(WorkerState.LOADING, WorkerState.BUSY_STREAMING)


async def test_a_worker_that_says_it_is_still_busy_is_not_handed_out_until_it_says_it_is_free():
    from omnivox.gateway.scheduling.health import apply_health
    from omnivox.protocol.control.workers import WorkerHealth

    pool, (w,), _clock = make_pool(1)
    t = pool.enqueue("streaming", None)
    pool.release(t.future.result(), cached_hash="h-after-turn")
    caps = Capabilities(streaming=True)
    # released at `done`, but the worker has not wound down yet (or its client left mid-turn): it
    # still says busy. It is not handed out on the gateway's word alone; the cached hash is kept.
    apply_health(pool, w, WorkerHealth(state=WorkerState.BUSY_STREAMING, engine="echo", capabilities=caps))
    assert w.state is WorkerState.BUSY_STREAMING and w.ticket_id is None and w.cached_hash == "h-after-turn"
    waiting = pool.enqueue("streaming", None)
    assert not waiting.future.done()
    # once it says it is free, it is dispatched, and its own word about its cache wins
    apply_health(pool, w, WorkerHealth(state=WorkerState.IDLE, engine="echo", capabilities=caps))
    assert waiting.future.result() is w and w.cached_hash is None


async def test_a_registration_cannot_take_another_worker_s_id_and_the_count_is_capped():
    pool = WorkerPool(max_workers=2)
    a = pool.add_worker("http://a:1", "w1")
    b = pool.add_worker("http://b:1", "w1")  # the id is taken: the gateway names it
    assert a.worker_id == "w1" and b.worker_id != "w1" and pool.workers["w1"].url == "http://a:1"
    assert pool.add_worker("http://a:1") is a  # a heartbeat of a known URL
    with pytest.raises(TooManyWorkers):
        pool.add_worker("http://c:1")


async def test_an_unconfirmed_release_keeps_the_worker_until_it_says_it_is_free():
    pool, (w,), _ = make_pool(1)
    t = pool.enqueue("streaming", None)
    pool.release(t.future.result(), ticket_id=t.ticket_id, confirmed=False)
    assert w.state is WorkerState.BUSY_STREAMING and w.ticket_id is None and w.sessions_served == 1
    nxt = pool.enqueue("streaming", None)
    assert not nxt.future.done()
    pool.report_health(w, WorkerState.BUSY_STREAMING)  # still winding down
    assert not nxt.future.done()
    pool.report_health(w, WorkerState.IDLE)
    assert nxt.future.result() is w


async def test_offline_workers_remember_since_when():
    pool, (w,), clock = make_pool(1)
    clock.now = 50.0
    pool.mark_offline(w)
    assert w.offline_since == 50.0
    pool.report_health(w, WorkerState.IDLE)
    assert w.state is WorkerState.IDLE and w.offline_since is None


S = WorkerState


# ---- workers


async def test_a_new_worker_is_loading_and_its_view_says_so(make_pool, clock):
    pool, _ = make_pool(0)
    w = pool.add_worker("http://fresh", "w-fresh")
    view = w.view(clock.now)
    assert view["worker_id"] == "w-fresh" and view["url"] == "http://fresh" and view["state"] == "LOADING"
    assert view["cached_hash"] is None and view["cache_age_s"] is None and view["busy_for_s"] is None
    assert view["capabilities"]["streaming"] is True and view["sessions_served"] == 0


async def test_a_busy_worker_s_view_says_what_and_for_how_long(make_pool, clock):
    pool, (w,) = make_pool(1)
    w.cached_hash, w.last_cache_used_at = "h", clock.now - 4.0
    t = pool.enqueue("streaming", "h")
    clock.now += 2.5
    view = w.view(clock.now)
    assert view["state"] == "BUSY_STREAMING" and view["ticket_id"] == t.ticket_id
    assert view["task_type"] == "streaming" and view["busy_for_s"] == 2.5 and view["cache_age_s"] == 6.5


async def test_a_worker_that_can_serve_nothing_asked_is_refused_at_once(make_pool):
    pool, _ = make_pool(2)  # streaming only
    with pytest.raises(WorkerUnavailable, match="realtime"):
        pool.enqueue("realtime")
    assert pool.queue_length == 0


async def test_with_no_workers_at_all_tickets_wait():
    pool = WorkerPool()
    t = pool.enqueue("realtime")
    assert not t.future.done() and pool.queue_length == 1


async def test_workers_in_error_do_not_count_as_able(make_pool):
    pool, (w,) = make_pool(1, realtime=True)
    pool.report_health(w, S.ERROR, "model failed")
    with pytest.raises(WorkerUnavailable):
        pool.enqueue("realtime")


async def test_unknown_task_types_are_a_bug():
    with pytest.raises(ValueError, match="unknown task type"):
        WorkerPool().enqueue("telepathy")


async def test_unreachable_counts_failures_and_goes_offline_only_when_idle(make_pool):
    pool, (a, b) = make_pool(2)
    pool.report_unreachable(a, offline_after=2)
    assert a.state is S.IDLE and a.health_failures == 1
    pool.report_unreachable(a, offline_after=2)
    assert a.state is S.OFFLINE
    t = pool.enqueue("streaming")
    assert t.future.result() is b
    for _ in range(5):
        pool.report_unreachable(b, offline_after=1)
    assert b.state is S.BUSY_STREAMING  # a session is running on it: its own connection decides
    pool.report_health(b, S.BUSY_STREAMING)
    assert b.health_failures == 0


async def test_removing_a_worker_forgets_it_and_moves_its_session_nowhere(make_pool):
    pool, _ = make_pool(2)
    t = pool.enqueue("streaming")
    held = t.future.result()
    pool.remove_worker(held.worker_id)
    assert held.worker_id not in pool.workers and held.state is S.OFFLINE and held.ticket_id is None
    pool.remove_worker("no-such-worker")  # nothing happens
    assert len(pool.workers) == 1


async def test_marking_offline_twice_is_harmless(make_pool, clock):
    pool, (w,) = make_pool(1)
    pool.mark_offline(w)
    clock.now += 10
    pool.mark_offline(w)
    assert w.offline_since == clock.now - 10  # the first time counts


# ---- tickets


async def test_cancel_a_queued_ticket(make_pool):
    pool, _ = make_pool(1)
    pool.enqueue("streaming")
    t = pool.enqueue("streaming")
    assert pool.cancel(t.ticket_id) is True
    with pytest.raises(TicketCancelled):
        t.future.result()
    assert pool.queue_length == 0 and pool.ticket(t.ticket_id) is None
    assert pool.cancel(t.ticket_id) is False  # already gone


async def test_an_assigned_ticket_cannot_be_cancelled(make_pool):
    pool, (w,) = make_pool(1)
    t = pool.enqueue("streaming")
    assert pool.cancel(t.ticket_id) is False
    assert t.future.result() is w and pool.ticket(t.ticket_id) is t


async def test_cancelling_moves_everyone_behind_up(make_pool):
    pool, _ = make_pool(1)
    pool.enqueue("streaming")
    a, b, c = (pool.enqueue("streaming") for _ in range(3))
    pool.cancel(b.ticket_id)
    assert pool.position(a.ticket_id)[0] == 1 and pool.position(c.ticket_id)[0] == 2
    assert [t.ticket_id for t in pool.queued()] == [a.ticket_id, c.ticket_id]


async def test_a_waiter_that_went_away_is_dropped_when_a_worker_frees(make_pool):
    pool, (w,) = make_pool(1)
    first = pool.enqueue("streaming")
    gone = pool.enqueue("streaming")
    nxt = pool.enqueue("streaming")
    gone.future.cancel()  # its session ended without cancelling the ticket
    pool.release(w, ticket_id=first.ticket_id)
    assert nxt.future.result() is w and pool.queue_length == 0


async def test_a_late_release_of_an_old_assignment_frees_nothing(make_pool):
    pool, (w,) = make_pool(1)
    first = pool.enqueue("streaming")
    second = pool.enqueue("streaming")
    pool.release(w, ticket_id=first.ticket_id)
    assert second.future.result() is w
    pool.release(w, ticket_id=first.ticket_id)  # the first session's release, again
    assert w.state is S.BUSY_STREAMING and w.ticket_id == second.ticket_id


async def test_release_keeps_the_cache_unless_told(make_pool, clock):
    pool, (w,) = make_pool(1)
    w.cached_hash, w.last_cache_used_at = "kept", 1.0
    pool.enqueue("streaming", "kept")
    pool.release(w)
    assert w.cached_hash == "kept" and w.last_cache_used_at == 1.0
    pool.enqueue("streaming", "kept")
    pool.release(w, cached_hash=None)
    assert w.cached_hash is None and w.last_cache_used_at == clock.now


async def test_releasing_an_idle_worker_does_nothing(make_pool):
    pool, (w,) = make_pool(1)
    pool.release(w)
    assert w.state is S.IDLE and w.sessions_served == 0


async def test_release_measures_the_time_served(make_pool, clock):
    pool, (w,) = make_pool(1)
    pool.durations.min_samples = 1
    pool.enqueue("streaming")
    clock.now += 12.0
    pool.release(w)
    assert pool.durations.samples("streaming") == 1 and pool.durations.expected("streaming") == 12.0


async def test_pausing_only_touches_duplex_sessions(make_pool):
    pool, (w,) = make_pool(1, duplex=True)
    pool.set_paused(w, True)  # idle: nothing to pause
    assert w.state is S.IDLE
    pool.enqueue("audio_duplex")
    pool.set_paused(w, True)
    pool.set_paused(w, True)
    assert w.state is S.DUPLEX_PAUSED
    pool.set_paused(w, False)
    assert w.state is S.DUPLEX_ACTIVE


# ---- positions and waits


async def test_waits_count_down_as_time_passes(make_pool, clock):
    pool, _ = make_pool(1)
    pool.enqueue("streaming")  # busy for the expected 20 s
    t = pool.enqueue("streaming")
    assert pool.position(t.ticket_id) == (1, 20.0)
    clock.now += 5
    assert pool.position(t.ticket_id) == (1, 15.0)
    clock.now += 100
    assert pool.position(t.ticket_id) == (1, 0.0)  # never below zero


async def test_positions_of_tickets_not_queued_are_none(make_pool):
    pool, _ = make_pool(1)
    running = pool.enqueue("streaming")
    assert pool.position(running.ticket_id) is None and pool.position("t_nope") is None


async def test_tickets_added_at_the_tail_extend_the_snapshot_in_place(make_pool):
    pool, _ = make_pool(2)
    pool.enqueue("streaming")
    pool.enqueue("streaming")
    queued = [pool.enqueue("streaming") for _ in range(2)]
    snap = pool.snapshot()
    later = pool.enqueue("streaming")
    assert pool.snapshot() is snap  # not recomputed
    assert snap[later.ticket_id] == (3, 40.0)
    assert [snap[t.ticket_id] for t in queued] == [(1, 20.0), (2, 20.0)]


async def test_a_loading_worker_counts_as_soon_free_in_the_estimate(make_pool):
    pool, (w,) = make_pool(1)
    pool.enqueue("streaming")
    pool.add_worker("http://loading")  # LOADING: expected to serve soon
    t = pool.enqueue("streaming")
    assert pool.position(t.ticket_id) == (1, 0.0)
    assert w.state is S.BUSY_STREAMING


async def test_the_change_signal_wakes_waiters(make_pool):
    pool, _ = make_pool(1)
    pool.enqueue("streaming")
    queued = pool.enqueue("streaming")
    waiter = asyncio.ensure_future(pool.wait_changed(60))
    await asyncio.sleep(0)
    assert not waiter.done()
    pool.cancel(queued.ticket_id)
    await asyncio.wait_for(waiter, 5)


async def test_wait_changed_returns_after_its_time_without_a_change(make_pool):
    pool, _ = make_pool(1)
    await pool.wait_changed(0.01)  # returns, raising nothing


async def test_a_worker_back_from_offline_serves_the_queue(make_pool):
    pool, (w,) = make_pool(1)
    pool.mark_offline(w)
    t = pool.enqueue("streaming")  # an offline worker still counts as able: the ticket waits
    assert not t.future.done()
    pool.report_health(w, S.IDLE)
    assert t.future.result() is w and t.worker_id == w.worker_id and not t.cache_hit


async def test_capabilities_decide_who_serves_a_mixed_queue():
    pool = WorkerPool()
    s = pool.add_worker("http://s")
    s.capabilities = Capabilities(streaming=True)
    pool.report_health(s, S.IDLE)
    r = pool.add_worker("http://r")
    r.capabilities = Capabilities(streaming=False, realtime=True)
    pool.report_health(r, S.IDLE)
    a = pool.enqueue("realtime")
    b = pool.enqueue("streaming")
    assert a.future.result() is r and b.future.result() is s
    assert r.state is S.DUPLEX_ACTIVE and s.state is S.BUSY_STREAMING
