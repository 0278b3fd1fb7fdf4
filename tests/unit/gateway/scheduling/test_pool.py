"""The in-memory pool's own workings (its behaviour as a scheduler store is in ``test_store``): the
snapshot of positions kept and extended in place, waiters that vanished without cancelling, the
ETA baselines and the worker state table."""

from __future__ import annotations

import pytest

from omnivox.core.errors import IllegalTransition
from omnivox.gateway.scheduling.eta import DurationModel, estimate_waits
from omnivox.gateway.scheduling.states import WorkerState, check_transition


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


async def test_a_waiter_that_went_away_is_dropped_when_a_worker_frees(make_pool):
    pool, (w,) = make_pool(1)
    first = pool.enqueue("streaming")
    gone = pool.enqueue("streaming")
    nxt = pool.enqueue("streaming")
    gone.future.cancel()  # its session ended without cancelling the ticket
    pool.release(w, ticket_id=first.ticket_id)
    assert nxt.future.result().worker_id == w.worker_id and pool.queue_length == 0


async def test_the_assignment_names_the_worker_and_a_new_epoch(make_pool):
    pool, (w,) = make_pool(1)
    t = pool.enqueue("streaming")
    given = t.future.result()
    assert (given.worker_id, given.url, given.ticket_id, given.epoch) == (w.worker_id, w.url, t.ticket_id, 1)
    assert w.epoch == 1 and w.ticket_id == t.ticket_id


async def test_offline_workers_remember_since_when(make_pool, clock):
    pool, (w,) = make_pool(1)
    clock.now = 50.0
    pool.mark_offline(w)
    clock.now += 10
    pool.mark_offline(w)  # again: the first time counts
    assert w.offline_since == 50.0
    pool.report_health(w, WorkerState.IDLE)
    assert w.state is WorkerState.IDLE and w.offline_since is None


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
