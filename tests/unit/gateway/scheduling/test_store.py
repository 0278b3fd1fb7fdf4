"""The scheduler store's contract, run against every store (in memory; Redis): cache-aware routing,
FIFO and dispatch, cancelling, late and unconfirmed releases, lost and returning workers, health
reports, registration, positions and waits, the pipeline's session slots, and fencing epochs."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.core.errors import QueueFull, TicketCancelled, TooManyWorkers, WorkerUnavailable
from omnivox.gateway.scheduling.pool import UNTAKEN_ASSIGNMENT_S
from omnivox.gateway.scheduling.store import Assignment, SchedulerStore, Ticket
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import WorkerState
from stores import health, view

S = WorkerState


def served(ticket: Ticket) -> Assignment:
    assert ticket.future.done(), "the ticket is still waiting"
    return ticket.future.result()


async def queued_ids(store: SchedulerStore) -> list[str]:
    return [t.ticket_id for t in await store.queue()]


# ---- routing


async def test_route_prefers_hash_match_then_empty_then_least_recently_used(make_store, clock):
    store, (a, b, c) = await make_store(3)
    await store.report_health(a, health(cached_hash="h1"))
    await store.report_health(b, health(cached_hash="h2"))
    # 1. exact match wins even though an empty worker exists
    t = await store.enqueue("streaming", "h1")
    assert served(t).worker_id == a and served(t).cache_hit and t.cache_hit
    clock.now += 1
    await store.release(served(t), cached_hash="h1b")
    # 2. no match: the worker without a cache, so no cache is evicted
    t = await store.enqueue("streaming", "zzz")
    assert served(t).worker_id == c and not served(t).cache_hit
    clock.now += 1
    await store.release(served(t), cached_hash="h3")
    # 3. no match, no empty worker: the least recently used cache is evicted (b's was never used)
    t = await store.enqueue("streaming", "other")
    assert served(t).worker_id == b
    clock.now += 1
    await store.release(served(t), cached_hash="h4")
    t = await store.enqueue("streaming", "yet another")
    assert served(t).worker_id == a  # a's cache is now the oldest


async def test_duplex_prefers_a_cacheless_worker_and_needs_the_capability(make_store):
    store, (a, b) = await make_store(2, duplex=True)
    await store.report_health(a, health(cached_hash="keep-me", duplex=True))
    t = await store.enqueue("audio_duplex")
    assert served(t).worker_id == b  # the streaming cache on a is not evicted
    assert (await view(store, b)).state is S.DUPLEX_ACTIVE
    await store.set_paused(served(t), True)
    assert (await view(store, b)).state is S.DUPLEX_PAUSED
    await store.set_paused(served(t), False)
    assert (await view(store, b)).state is S.DUPLEX_ACTIVE
    await store.release(served(t))
    assert (await view(store, b)).state is S.IDLE
    other, _ = await make_store(1, duplex=False)
    with pytest.raises(WorkerUnavailable):
        await other.enqueue("audio_duplex")


async def test_capabilities_decide_who_serves_a_mixed_queue(make_store):
    store, (s, r) = await make_store(2)
    await store.report_health(r, health(streaming=False, realtime=True))
    first = await store.enqueue("streaming")  # takes s
    voice = await store.enqueue("realtime")
    assert served(first).worker_id == s and served(voice).worker_id == r
    assert (await view(store, r)).state is S.DUPLEX_ACTIVE
    assert (await view(store, s)).state is S.BUSY_STREAMING


async def test_a_ticket_nobody_idle_can_serve_is_stepped_over(make_store):
    store, (s, r) = await make_store(2)
    await store.report_health(r, health(streaming=False, realtime=True))
    held = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")  # only s serves it: it waits
    voice = await store.enqueue("realtime")  # behind it, but r is idle: served at once
    assert not waiting.future.done() and served(voice).worker_id == r
    await store.release(served(held))
    assert served(waiting).worker_id == s


# ---- FIFO and the queue


async def test_release_dispatches_the_next_in_order(make_store, clock):
    store, (a,) = await make_store(1)
    first = await store.enqueue("streaming")
    waiting = [await store.enqueue("streaming", f"h{i}") for i in range(3)]
    where = await store.positions([t.ticket_id for t in waiting])
    assert [where.places[t.ticket_id][0] for t in waiting] == [1, 2, 3] and where.queue_length == 3
    clock.now += 7
    await store.release(served(first), cached_hash="after-turn")
    assert served(waiting[0]).worker_id == a and not waiting[1].future.done()
    where = await store.positions([t.ticket_id for t in waiting])
    assert waiting[0].ticket_id not in where.places
    assert [where.places[t.ticket_id][0] for t in waiting[1:]] == [1, 2]


async def test_queue_full_leaves_nothing_behind(make_store):
    store, _ = await make_store(1, max_queue=2)
    for _ in range(3):
        await store.enqueue("streaming")
    with pytest.raises(QueueFull):
        await store.enqueue("streaming")
    assert await store.queue_length() == 2


async def test_a_worker_that_can_serve_nothing_asked_is_refused_at_once(make_store):
    store, _ = await make_store(2)  # streaming only
    with pytest.raises(WorkerUnavailable, match="realtime"):
        await store.enqueue("realtime")
    assert await store.queue_length() == 0


async def test_with_no_workers_at_all_tickets_wait(make_store):
    store, _ = await make_store(0)
    t = await store.enqueue("realtime")
    assert not t.future.done() and await store.queue_length() == 1


async def test_workers_in_error_do_not_count_as_able(make_store):
    store, (w,) = await make_store(1, realtime=True)
    await store.report_health(w, health(S.ERROR, error="model failed", realtime=True))
    with pytest.raises(WorkerUnavailable):
        await store.enqueue("realtime")


async def test_unknown_task_types_are_a_bug(make_store):
    store, _ = await make_store(1)
    with pytest.raises(ValueError, match="unknown task type"):
        await store.enqueue("telepathy")


async def test_cancel_a_queued_ticket(make_store):
    store, _ = await make_store(1)
    await store.enqueue("streaming")
    t = await store.enqueue("streaming")
    assert await store.cancel(t.ticket_id) is True
    with pytest.raises(TicketCancelled):
        t.future.result()
    assert await store.queue_length() == 0 and await store.ticket(t.ticket_id) is None
    assert await store.cancel(t.ticket_id) is False  # already gone


async def test_an_assigned_ticket_cannot_be_cancelled(make_store):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    assert await store.cancel(t.ticket_id) is False
    shown = await store.ticket(t.ticket_id)
    assert served(t).worker_id == w and shown is not None and shown.worker_id == w and shown.position == 0


async def test_cancelling_moves_everyone_behind_up(make_store):
    store, _ = await make_store(1)
    await store.enqueue("streaming")
    a, b, c = [await store.enqueue("streaming") for _ in range(3)]
    await store.cancel(b.ticket_id)
    where = await store.positions([a.ticket_id, c.ticket_id])
    assert where.places[a.ticket_id][0] == 1 and where.places[c.ticket_id][0] == 2
    assert await queued_ids(store) == [a.ticket_id, c.ticket_id]


async def test_a_waiter_withdrawn_while_queued_leaves_the_queue(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    gone = await store.enqueue("streaming")
    nxt = await store.enqueue("streaming")
    await store.withdraw(gone)
    await store.release(served(held))
    assert served(nxt).worker_id == w and await store.queue_length() == 0


async def test_a_waiter_withdrawn_just_as_it_was_served_gives_the_worker_back(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")
    await store.release(served(held))  # the ticket is assigned now ...
    await store.withdraw(waiting)  # ... and its waiter goes before it could take the worker
    shown = await view(store, w)
    assert shown.state is S.IDLE and shown.ticket_id is None


# ---- releases


async def test_a_late_release_of_an_old_assignment_frees_nothing(make_store):
    store, (w,) = await make_store(1)
    first = await store.enqueue("streaming")
    second = await store.enqueue("streaming")
    await store.release(served(first))
    assert served(second).worker_id == w
    await store.release(served(first))  # the first session's release, again
    shown = await view(store, w)
    assert shown.state is S.BUSY_STREAMING and shown.ticket_id == second.ticket_id


async def test_release_keeps_the_cache_unless_told(make_store):
    store, (w,) = await make_store(1)
    await store.report_health(w, health(cached_hash="kept"))
    t = await store.enqueue("streaming", "kept")
    await store.release(served(t))
    assert (await view(store, w)).cached_hash == "kept"
    t = await store.enqueue("streaming", "kept")
    assert served(t).cache_hit
    await store.release(served(t), cached_hash=None)
    assert (await view(store, w)).cached_hash is None


async def test_release_measures_the_time_served(make_store, clock):
    store, (_w, _v) = await make_store(2, min_samples=1)
    t = await store.enqueue("streaming")
    clock.now += 12.0
    await store.release(served(t))
    await store.enqueue("streaming")
    await store.enqueue("streaming")  # both workers busy for the measured 12 s now
    behind = await store.enqueue("streaming")
    assert (await store.positions([behind.ticket_id])).places[behind.ticket_id] == (1, 12.0)


async def test_an_unconfirmed_release_keeps_the_worker_until_it_says_it_is_free(make_store):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    await store.release(served(t), confirmed=False)
    shown = await view(store, w)
    assert shown.state is S.BUSY_STREAMING and shown.ticket_id is None and shown.sessions_served == 1
    nxt = await store.enqueue("streaming")
    assert not nxt.future.done()
    await store.report_health(w, health(S.BUSY_STREAMING))  # still winding down
    assert not nxt.future.done()
    await store.report_health(w, health())
    assert served(nxt).worker_id == w


async def test_a_worker_that_says_it_is_still_busy_is_not_handed_out_until_it_says_it_is_free(make_store):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    await store.release(served(t), cached_hash="h-after-turn")
    # released at `done`, but the worker has not wound down yet: it still says busy. It is not handed
    # out on the gateway's word alone; the cached hash is kept.
    await store.report_health(w, health(S.BUSY_STREAMING))
    shown = await view(store, w)
    assert shown.state is S.BUSY_STREAMING and shown.ticket_id is None and shown.cached_hash == "h-after-turn"
    waiting = await store.enqueue("streaming")
    assert not waiting.future.done()
    # once it says it is free, it is dispatched, and its own word about its cache wins
    await store.report_health(w, health())
    assert served(waiting).worker_id == w and (await view(store, w)).cached_hash is None


async def test_releasing_an_idle_worker_does_nothing(make_store):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    await store.release(served(t))
    await store.release(served(t))
    shown = await view(store, w)
    assert shown.state is S.IDLE and shown.sessions_served == 1


# ---- lost, unreachable and returning workers


async def test_a_worker_lost_mid_session_frees_nothing_twice(make_store):
    store, (_a, _b) = await make_store(2)
    t1 = await store.enqueue("streaming")
    t2 = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")
    lost = served(t1)
    await store.worker_lost(lost)
    shown = await view(store, lost.worker_id)
    assert shown.state is S.OFFLINE and shown.ticket_id is None
    await store.release(lost, cached_hash="x")  # the session's late release is a no-op
    shown = await view(store, lost.worker_id)
    assert shown.state is S.OFFLINE and shown.cached_hash is None
    assert not waiting.future.done()
    await store.report_health(lost.worker_id, health())  # back: the queue moves
    assert served(waiting).worker_id == lost.worker_id
    assert served(t2).worker_id != lost.worker_id


async def test_a_lost_report_about_an_older_assignment_spares_the_newer_one(make_store):
    store, (w,) = await make_store(1)
    first = await store.enqueue("streaming")
    await store.release(served(first))
    second = await store.enqueue("streaming")
    await store.worker_lost(served(first))  # late: the worker serves another session now
    shown = await view(store, w)
    assert shown.state is S.BUSY_STREAMING and shown.ticket_id == second.ticket_id


async def test_loading_and_error_workers_are_not_assigned(make_store):
    store, (a,) = await make_store(1)
    await store.report_health(a, health(S.ERROR, error="boom"))
    shown = await view(store, a)
    assert shown.state is S.ERROR and shown.error == "boom"
    b, new = await store.register("http://late")
    assert new and (await view(store, b)).state is S.LOADING
    t = await store.enqueue("streaming")
    assert not t.future.done()
    await store.report_health(b, health())
    assert served(t).worker_id == b


async def test_unreachable_counts_failures_and_goes_offline_only_when_idle(make_store):
    store, (a, b) = await make_store(2)
    await store.report_unreachable(a, offline_after=2)
    assert (await view(store, a)).state is S.IDLE
    await store.report_unreachable(a, offline_after=2)
    assert (await view(store, a)).state is S.OFFLINE
    t = await store.enqueue("streaming")
    assert served(t).worker_id == b
    for _ in range(5):
        await store.report_unreachable(b, offline_after=1)
    assert (await view(store, b)).state is S.BUSY_STREAMING  # in a session: its own connection decides


async def test_a_busy_report_from_a_loading_worker_keeps_it_loading(make_store):
    store, _ = await make_store(0)
    w, _ = await store.register("http://w:1")
    await store.report_health(w, health(S.BUSY_STREAMING))
    assert (await view(store, w)).state is S.LOADING  # not handed out either way; IDLE once it says so


async def test_a_worker_back_from_offline_serves_the_queue(make_store):
    store, (w,) = await make_store(1)
    await store.report_unreachable(w, offline_after=1)
    t = await store.enqueue("streaming")  # an offline worker still counts as able: the ticket waits
    assert not t.future.done()
    await store.report_health(w, health())
    assert served(t).worker_id == w and t.worker_id == w and not t.cache_hit


async def test_workers_offline_too_long_are_forgotten(make_store, clock):
    store, (a, b) = await make_store(2)
    await store.report_unreachable(a, offline_after=1)
    clock.now += 5
    await store.report_unreachable(b, offline_after=1)
    assert await store.forget_offline(10) == []
    clock.now += 6
    assert [w.worker_id for w in await store.forget_offline(10)] == [a]
    assert [w.worker_id for w in await store.workers()] == [b]
    await store.report_health(b, health())  # back in time: kept
    clock.now += 60
    assert await store.forget_offline(10) == []


# ---- registration


async def test_a_registration_cannot_take_another_worker_s_id_and_the_count_is_capped(make_store):
    store, _ = await make_store(0, max_workers=2)
    a, _ = await store.register("http://a:1", "w1")
    b, _ = await store.register("http://b:1", "w1")  # the id is taken: the gateway names it
    assert a == "w1" and b != "w1"
    assert {w.worker_id: w.url for w in await store.workers()}["w1"] == "http://a:1"
    assert await store.register("http://a:1") == (a, False)  # a heartbeat of a known URL
    with pytest.raises(TooManyWorkers):
        await store.register("http://c:1")


async def test_a_new_worker_is_loading_and_its_view_says_so(make_store):
    store, _ = await make_store(0)
    w, _ = await store.register("http://fresh", "w-fresh")
    shown = (await view(store, w)).to_json()
    assert shown["worker_id"] == "w-fresh" and shown["url"] == "http://fresh" and shown["state"] == "LOADING"
    assert shown["cached_hash"] is None and shown["cache_age_s"] is None and shown["busy_for_s"] is None
    assert shown["capabilities"]["streaming"] is True and shown["sessions_served"] == 0


async def test_a_busy_worker_s_view_says_what_and_for_how_long(make_store, clock):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    clock.now += 4.0
    await store.release(served(t), cached_hash="h")
    t = await store.enqueue("streaming", "h")
    clock.now += 2.5
    shown = await view(store, w)
    assert shown.state is S.BUSY_STREAMING and shown.ticket_id == t.ticket_id
    assert shown.task_type == "streaming" and shown.busy_for_s == 2.5 and shown.cache_age_s == 2.5
    assert shown.engine == "echo"


async def test_health_reports_fill_in_engine_capabilities_and_voices(make_store):
    store, (w,) = await make_store(1)
    after = await store.report_health(w, health(engine="cascade", voices=["heart", "bella"], realtime=True))
    assert after is not None and after.engine == "cascade" and after.voices == ("heart", "bella")
    assert after.capabilities.realtime and after.state is S.IDLE
    assert await store.report_health("w-nobody", health()) is None


# ---- fencing epochs


async def test_every_assignment_is_newer_than_any_the_worker_has_seen(make_store):
    store, (w,) = await make_store(1)
    first = await store.enqueue("streaming")
    await store.release(served(first))
    second = await store.enqueue("streaming")
    assert served(second).epoch > served(first).epoch
    await store.release(served(second))
    await store.report_health(w, health(epoch=100))  # it saw 100 (another scheduler's, before ours)
    third = await store.enqueue("streaming")
    assert served(third).epoch == 101 and (await view(store, w)).epoch == 101


# ---- a worker that did not take its session: the ticket back at its place


async def test_a_refused_assignment_puts_its_ticket_back_at_its_place_for_the_next_worker(make_store):
    store, (w,) = await make_store(1)
    first = await store.enqueue("streaming")
    refused = served(first)
    later = [await store.enqueue("streaming") for _ in range(2)]
    again = await store.requeue(first, refused)  # the worker refused it at the handshake
    assert again is not None and again.ticket_id == first.ticket_id and not again.future.done()
    # back ahead of everyone who came after it, never twice
    assert await queued_ids(store) == [first.ticket_id] + [t.ticket_id for t in later]
    assert (await view(store, w)).state is S.BUSY_STREAMING  # busy until its own health says free
    assert (await view(store, w)).ticket_id is None
    await store.report_health(w, health(epoch=refused.epoch))
    given = served(again)  # the next worker goes to it, not to those behind it
    assert given.worker_id == w and given.epoch == refused.epoch + 1
    assert await queued_ids(store) == [t.ticket_id for t in later]
    # the refusal heard twice (or late) takes nothing back: the ticket holds a newer assignment
    assert await store.requeue(first, refused) is None and await store.requeue(again, refused) is None
    assert await queued_ids(store) == [t.ticket_id for t in later]
    await store.release(given)
    assert served(later[0]).worker_id == w


async def test_an_unreachable_assigned_worker_goes_offline_and_the_ticket_to_the_next(make_store):
    store, _ = await make_store(2)
    holder = await store.enqueue("streaming")
    first = await store.enqueue("streaming")
    behind = await store.enqueue("streaming")
    refused = served(first)
    again = await store.requeue(first, refused, lost=True)
    assert again is not None and not again.future.done()
    assert (await view(store, refused.worker_id)).state is S.OFFLINE
    assert await queued_ids(store) == [first.ticket_id, behind.ticket_id]
    await store.release(served(holder))
    assert served(again).worker_id == served(holder).worker_id and not behind.future.done()


async def test_a_ticket_queued_already_is_not_put_back_twice(make_store):
    store, (w,) = await make_store(1)
    first = await store.enqueue("streaming")
    refused = served(first)
    again = await store.requeue(first, refused)
    assert again is not None
    assert await store.requeue(first, refused) is None  # queued already: one place, not two
    assert await queued_ids(store) == [first.ticket_id]
    await store.report_health(w, health(epoch=refused.epoch))
    assert served(again).epoch == refused.epoch + 1


# ---- positions and waits


async def test_waits_count_down_as_time_passes(make_store, clock):
    store, _ = await make_store(1)
    await store.enqueue("streaming")  # busy for the expected 20 s
    t = await store.enqueue("streaming")
    assert (await store.positions([t.ticket_id])).places[t.ticket_id] == (1, 20.0)
    clock.now += 5
    assert (await store.positions([t.ticket_id])).places[t.ticket_id] == (1, 15.0)
    clock.now += 100
    assert (await store.positions([t.ticket_id])).places[t.ticket_id] == (1, 0.0)  # never below zero


async def test_positions_of_tickets_not_queued_are_absent(make_store):
    store, _ = await make_store(1)
    running = await store.enqueue("streaming")
    assert (await store.positions([running.ticket_id, "t_nope"])).places == {}


async def test_a_loading_worker_counts_as_soon_free_in_the_estimate(make_store):
    store, (w,) = await make_store(1)
    await store.enqueue("streaming")
    await store.register("http://loading")  # LOADING: expected to serve soon
    t = await store.enqueue("streaming")
    assert (await store.positions([t.ticket_id])).places[t.ticket_id] == (1, 0.0)
    assert (await view(store, w)).state is S.BUSY_STREAMING


async def test_the_queue_view_lists_tickets_in_order_with_their_waits(make_store, clock):
    store, _ = await make_store(1)
    await store.enqueue("streaming")
    a = await store.enqueue("streaming")
    clock.now += 2
    b = await store.enqueue("streaming")
    shown = await store.queue()
    assert [(t.ticket_id, t.position, t.estimated_wait_s) for t in shown] == [
        (a.ticket_id, 1, 18.0),
        (b.ticket_id, 2, 38.0),
    ]
    assert [t.waited_s for t in shown] == [2.0, 0.0]
    assert all(t.gateway == store.gateway_id for t in shown)


async def test_the_change_signal_wakes_waiters(make_store):
    store, _ = await make_store(1)
    await store.enqueue("streaming")
    queued = await store.enqueue("streaming")
    waiter = asyncio.ensure_future(store.wait_changed(60))
    await asyncio.sleep(0)
    assert not waiter.done()
    await store.cancel(queued.ticket_id)
    await asyncio.wait_for(waiter, 5)


async def test_wait_changed_returns_after_its_time_without_a_change(make_store):
    store, _ = await make_store(1)
    await store.wait_changed(0.01)  # returns, raising nothing


# ---- the pipeline's session slots


def _report(slots: int | None) -> PipelineReport:
    return PipelineReport(pipeline="cascade", address="tcp://127.0.0.1:1", epoch="e1", session_slots=slots)


async def test_voice_sessions_on_pipeline_workers_wait_for_a_slot(make_store):
    store, _ = await make_store(3, realtime=True, engine="pipeline")
    await store.set_pipeline(_report(2))
    first, second, third = [await store.enqueue("realtime") for _ in range(3)]
    assert first.future.done() and second.future.done()
    assert not third.future.done() and await store.queue_length() == 1  # an idle worker, but no slot
    state = await store.pipeline()
    assert state is not None and state.slots_used == 2 and await store.session_slots() == 2
    await store.release(served(first))
    assert third.future.done()  # the freed slot went to the waiting session


async def test_streaming_turns_and_other_engines_take_no_slot(make_store):
    store, (pipe, other) = await make_store(2, realtime=True, engine="pipeline")
    await store.report_health(other, health(engine="cascade", realtime=True))
    await store.set_pipeline(_report(0))
    turn = await store.enqueue("streaming")
    assert turn.future.done()  # a streaming turn holds no ASR slot
    voice = await store.enqueue("realtime")
    assert served(voice).worker_id == other  # not on the slotless pipeline worker
    assert served(turn).worker_id == pipe


async def test_more_slots_let_waiting_sessions_through(make_store):
    store, _ = await make_store(2, realtime=True, engine="pipeline")
    await store.set_pipeline(_report(0))
    waiting = await store.enqueue("realtime")
    assert not waiting.future.done()
    await store.set_pipeline(_report(1))
    assert (await view(store, served(waiting).worker_id)).state is S.DUPLEX_ACTIVE


async def test_a_worker_free_again_after_an_assignment_it_took_is_freed_without_a_release(make_store):
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")
    await store.report_health(w, health(epoch=served(t).epoch - 1))  # not connected yet: kept
    assert not waiting.future.done()
    # it took the session (it has seen the epoch) and is idle again, but no release came (the
    # gateway relaying it lost track of it): the worker goes to the next ticket
    await store.report_health(w, health(epoch=served(t).epoch))
    assert served(waiting).worker_id == w and served(waiting).epoch == served(t).epoch + 1
    await store.release(served(t))  # the lost release, late: frees nothing
    assert (await view(store, w)).ticket_id == waiting.ticket_id


async def test_an_assignment_never_taken_is_freed_by_its_worker_s_idle_word_in_bounded_time(
    make_store, clock
):
    # its gateway never opened it (it lost track of it): the worker, idle and never on its epoch,
    # is held only until the assignment is UNTAKEN_ASSIGNMENT_S old; never earlier (fencing: a
    # gateway may still be opening it), and nothing is measured (nothing was served)
    store, (w,) = await make_store(1)
    t = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")
    clock.now += UNTAKEN_ASSIGNMENT_S - 0.5
    await store.report_health(w, health(epoch=served(t).epoch - 1))
    assert not waiting.future.done()
    clock.now += 0.5
    await store.report_health(w, health(epoch=served(t).epoch - 1))
    assert served(waiting).worker_id == w and served(waiting).epoch == served(t).epoch + 1
    assert (await view(store, w)).sessions_served == 0
    await store.release(served(t))  # its gateway's late release frees nothing
    assert (await view(store, w)).ticket_id == waiting.ticket_id


# ---- orphans: a waiter whose client may come back (resume tokens)


async def test_an_orphan_keeps_its_place_and_holds_nobody_up(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    first = await store.enqueue("streaming")
    second = await store.enqueue("streaming")
    third = await store.enqueue("streaming")
    await store.orphan(first, grace_s=10)
    assert await queued_ids(store) == [second.ticket_id, third.ticket_id]  # out of the line
    again = await store.reattach(first.ticket_id, "streaming")
    assert again is not None and again.ticket_id == first.ticket_id
    assert await queued_ids(store) == [first.ticket_id, second.ticket_id, third.ticket_id]
    await store.release(served(held))
    assert served(again).worker_id == w  # its old place: first in line
    assert not second.future.done()


async def test_an_orphan_is_passed_over_while_away(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    away = await store.enqueue("streaming")
    behind = await store.enqueue("streaming")
    await store.orphan(away, grace_s=10)
    await store.release(served(held))
    assert served(behind).worker_id == w  # the worker is not kept for a client that left
    back = await store.reattach(away.ticket_id, "streaming")
    assert back is not None and await queued_ids(store) == [away.ticket_id]


async def test_an_orphan_is_gone_after_its_grace_and_its_place_is_one_connection_s(make_store, clock):
    store, _ = await make_store(1)
    await store.enqueue("streaming")  # holds the worker
    late = await store.enqueue("streaming")
    twice = await store.enqueue("streaming")
    await store.orphan(late, grace_s=5)
    clock.now += 3
    await store.orphan(twice, grace_s=5)
    clock.now += 3  # late's grace is over, twice's is not
    assert await store.reattach(late.ticket_id, "streaming") is None
    assert await store.reattach("t_never_was", "streaming") is None
    first = await store.reattach(twice.ticket_id, "streaming")
    second = await store.reattach(twice.ticket_id, "streaming")  # the newest connection has it
    assert first is not None and second is not None
    with pytest.raises(TicketCancelled):
        await asyncio.wait_for(first.future, 5)
    assert await queued_ids(store) == [twice.ticket_id]  # one place, not two


async def test_an_orphan_comes_back_only_as_the_session_kind_it_waited_as(make_store):
    store, _ = await make_store(1, duplex=True)
    await store.enqueue("streaming")  # holds the worker
    voice = await store.enqueue("audio_duplex")
    await store.orphan(voice, grace_s=10)
    assert await store.reattach(voice.ticket_id, "streaming") is None
    assert await store.reattach(voice.ticket_id, "audio_duplex") is not None


async def test_an_orphaned_waiter_assigned_as_it_left_gives_the_worker_back(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    waiting = await store.enqueue("streaming")
    await store.release(served(held))  # assigned in this step...
    await store.orphan(waiting, grace_s=10)  # ...as its client left: nothing to come back to
    shown = await view(store, w)
    assert shown.state is S.IDLE and shown.ticket_id is None
    assert await store.reattach(waiting.ticket_id, "streaming") is None


async def test_a_client_back_before_its_old_connection_is_seen_gone_takes_the_place_over(make_store):
    store, (w,) = await make_store(1)
    held = await store.enqueue("streaming")
    old = await store.enqueue("streaming")
    behind = await store.enqueue("streaming")
    new = await store.reattach(old.ticket_id, "streaming")
    assert new is not None and new is not old
    with pytest.raises(TicketCancelled):
        await asyncio.wait_for(old.future, 5)  # the old connection's waiter hears it
    await store.withdraw(old)  # ... and its going later takes nothing from the new one
    await store.orphan(old, grace_s=10)
    assert await queued_ids(store) == [old.ticket_id, behind.ticket_id]
    await store.release(served(held))
    assert served(new).worker_id == w and not behind.future.done()
