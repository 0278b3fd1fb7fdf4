"""Cache-aware routing priorities, ETA estimates and the worker state table."""

from __future__ import annotations

import pytest

from omnivox.core.errors import IllegalTransition, QueueFull, TooManyWorkers, WorkerUnavailable
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
