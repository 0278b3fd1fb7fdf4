"""The worker pool beyond routing: worker views, cancelling, positions and waits as time passes,
unreachable workers, removal, stale waiters, late releases and the change signal."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.core.errors import TicketCancelled, WorkerUnavailable
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.protocol.control.workers import Capabilities

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
