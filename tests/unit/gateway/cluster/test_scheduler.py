"""The Redis store with several gateways on one real redis-server: assignments reach the gateway
holding the client whoever's operation made them, cancels reach their waiters, a gateway that stops
renewing its lease is reaped (its waiters leave, its workers come back when their health says free,
its health checks move), a paused gateway re-asserts what it holds, a store restarted empty is
rebuilt by re-assertion before anything is dispatched, and an unreachable store refuses new tickets
while releases wait to be retried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from omnivox.core.errors import StoreUnavailable, TicketCancelled
from omnivox.gateway.cluster.connection import parse_store_url
from omnivox.gateway.cluster.scheduler import RedisStore
from omnivox.gateway.scheduling.pool import UNTAKEN_ASSIGNMENT_S
from omnivox.protocol.control.workers import WorkerState
from redis_server import RedisServer
from stores import FakeClock, health, prefix, redis_store, view

Gateways = Callable[..., Awaitable[list[RedisStore]]]


@pytest.fixture
async def gateways(redis_db: RedisServer, clock: FakeClock) -> AsyncIterator[Gateways]:
    """``await gateways(n, workers=k, url=)``: n gateways sharing one key prefix (and ``clock``),
    with k idle streaming workers registered."""
    made: list[RedisStore] = []
    key = prefix()

    async def make(
        n: int, *, workers: int = 1, url: str | None = None, timeout_s: float = 2.0
    ) -> list[RedisStore]:
        stores = [
            redis_store(
                url or redis_db.unix_url, key, clock, gateway_id=f"g{i}", max_queue=50, timeout_s=timeout_s
            )
            for i in range(n)
        ]
        for s in stores:
            await s.start()
        made.extend(stores)
        for i in range(workers):
            wid, _ = await stores[0].register(f"http://w{i}")
            await stores[0].report_health(wid, health())
        return stores

    yield make
    for s in made:
        s.background = False
        await s.close()


async def test_an_assignment_made_by_another_gateway_reaches_the_waiter_s_gateway(gateways):
    a, b = await gateways(2)
    held = await b.enqueue("streaming")
    waiting = await a.enqueue("streaming")
    assert not waiting.future.done()
    await b.release(held.future.result())  # B's release dispatches A's ticket ...
    assert not waiting.future.done()
    assert await a.poll_inbox() == 1  # ... which A hears from its inbox
    given = waiting.future.result()
    assert given.worker_id == held.future.result().worker_id and given.epoch == 2
    assert await a.poll_inbox() == 0  # read once, trimmed


async def test_clients_alternating_between_gateways_are_served_in_arrival_order(gateways):
    a, b = await gateways(2)
    holder = await a.enqueue("streaming")
    tickets = [await (a if i % 2 else b).enqueue("streaming") for i in range(6)]
    order = []
    current = holder
    for _ in tickets:
        await (a if current in [holder, *tickets[1::2]] else b).release(current.future.result())
        await a.poll_inbox()
        await b.poll_inbox()
        served = [t for t in tickets if t.future.done() and t not in order]
        assert len(served) == 1
        order.append(served[0])
        current = served[0]
    assert order == tickets


async def test_a_cancel_on_another_gateway_reaches_the_waiter(gateways):
    a, b = await gateways(2)
    await a.enqueue("streaming")
    waiting = await a.enqueue("streaming")
    assert await b.cancel(waiting.ticket_id) is True
    await a.poll_inbox()
    with pytest.raises(TicketCancelled):
        waiting.future.result()


async def test_an_assignment_nobody_waits_for_any_more_gives_the_worker_back(gateways):
    a, b = await gateways(2)
    held = await b.enqueue("streaming")
    waiting = await a.enqueue("streaming")
    a._waiting.clear()  # as if its waiter's event came after the waiter left
    await b.release(held.future.result())
    await a.poll_inbox()
    for _ in range(50):
        if (await view(a, held.future.result().worker_id)).state is WorkerState.IDLE:
            break
        await a.poll_inbox()
    assert not waiting.future.done()
    assert (await view(a, held.future.result().worker_id)).state is WorkerState.IDLE


async def test_a_gateway_that_stops_renewing_its_lease_is_reaped(gateways, clock):
    a, b = await gateways(2, workers=2)
    busy = await a.enqueue("streaming")  # A relays a session on one worker
    theirs = [await b.enqueue("streaming")]  # (the second worker serves it at once)
    for _ in range(2):
        await a.enqueue("streaming")  # A's waiters
    theirs += [await b.enqueue("streaming") for _ in range(2)]
    clock.now += 2
    await b.membership.beat()
    assert await b.membership.reap() == []  # A's lease has a second left
    clock.now += 2
    assert await b.membership.reap() == [a.gateway_id]
    # A's waiters left; B's kept their order
    assert [t.ticket_id for t in await b.queue()] == [t.ticket_id for t in theirs[1:]]
    # the worker A relayed stays busy until its own health says it is free
    worker = busy.future.result().worker_id
    shown = await view(b, worker)
    assert shown.state is WorkerState.BUSY_STREAMING and shown.ticket_id is None
    await b.report_health(worker, health())
    assert theirs[1].future.result().worker_id == worker and not theirs[2].future.done()
    # A's health-check duties are B's now: B monitors every worker
    assert {wid for wid, _ in await b.monitored()} == {w.worker_id for w in await b.workers()}
    assert [g["gateway_id"] for g in (await b.status())["gateways"]] == [b.gateway_id]


@pytest.mark.parametrize("grace_ms", [0, 4000], ids=["dropped", "kept-for-its-client"])
async def test_a_gateway_back_from_a_pause_past_its_lease_re_asserts_its_waiters_in_place(
    gateways, clock, grace_ms: int
):
    # the reaper drops A's waiter, or (a resume grace) keeps its place orphaned for its client; A,
    # alive after all (its lease ran out while it was paused or the store away), re-asserts it
    # either way: it goes back in line at its place, not left out with A's client waiting for ever
    a, b = await gateways(2)
    b.resume_grace_ms = grace_ms
    await b.enqueue("streaming")  # holds the worker
    first = await b.enqueue("streaming")
    mine = await a.enqueue("streaming")
    last = await b.enqueue("streaming")
    clock.now += 4
    await b.membership.beat()
    await b.membership.reap()  # A paused past its lease: reaped
    assert [t.ticket_id for t in await b.queue()] == [first.ticket_id, last.ticket_id]
    assert await a.membership.beat() == "reaped"  # A wakes: it puts its waiter back in its place
    assert [t.ticket_id for t in await b.queue()] == [first.ticket_id, mine.ticket_id, last.ticket_id]


async def test_health_checks_are_shared_out_and_taken_over(gateways, clock):
    a, b = await gateways(2, workers=4)
    await a.membership.beat()
    await b.membership.beat()
    mine_a = {w for w, _ in await a.monitored()}
    mine_b = {w for w, _ in await b.monitored()}
    assert len(mine_a) == 2 and len(mine_b) == 2 and not mine_a & mine_b
    clock.now += 4
    await b.membership.beat()
    await b.membership.reap()
    assert len(await b.monitored()) == 4


@pytest.fixture
async def own_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


async def test_a_store_restarted_empty_is_rebuilt_by_re_assertion_before_dispatch(
    gateways, own_server, clock
):
    a, b = await gateways(2, url=own_server.url)
    session = await a.enqueue("streaming")  # A relays a session
    waiting = [await b.enqueue("streaming"), await a.enqueue("streaming")]
    worker = session.future.result().worker_id
    clock.now += 1
    own_server.restart_empty()
    assert await b.membership.beat() == "fresh"
    late = await b.enqueue("streaming")  # a client arriving meanwhile queues behind the re-asserted
    assert await a.membership.beat() == "fresh"
    shown = {t.ticket_id: t.position for t in await a.queue()}
    assert shown == {waiting[0].ticket_id: 1, waiting[1].ticket_id: 2, late.ticket_id: 3}
    # the worker is the session's again (it re-registers on its own, and its health checks resume)
    assert (await view(a, worker)).ticket_id == session.ticket_id
    await a.register("http://w0")
    await a.report_health(worker, health(WorkerState.BUSY_STREAMING))
    await a.release(session.future.result())
    assert not waiting[0].future.done()  # held: every live gateway re-asserts first
    clock.now += 5
    await b.membership.reap()  # the hold is over
    await b.poll_inbox()
    assert waiting[0].future.done() and waiting[0].future.result().worker_id == worker


async def test_an_unreachable_store_refuses_new_tickets_and_keeps_releases_for_later(gateways, own_server):
    (a,) = await gateways(1, url=own_server.url, timeout_s=0.3)
    session = await a.enqueue("streaming")
    own_server.pause()  # unreachable (a paused server answers nothing)
    try:
        with pytest.raises(StoreUnavailable):
            await a.enqueue("streaming")
        await a.release(session.future.result())  # never raises: kept for later
        assert len(a.pending) == 2 and a.up is False  # the release, and withdrawing the lost enqueue
        assert (await a.status())["up"] is False
    finally:
        own_server.resume()
    await a.pending.retry()
    assert len(a.pending) == 0
    assert (await view(a, session.future.result().worker_id)).state is WorkerState.IDLE
    # the ticket whose enqueue went unanswered was withdrawn too: nothing waits
    assert await a.queue_length() == 0


def test_store_urls_are_parsed_and_redacted():
    assert parse_store_url(None).is_memory and parse_store_url("memory").is_memory
    url = parse_store_url("redis://:secret@cache:6379/0")
    assert url.scheme == "redis" and url.redacted == "redis://cache:6379/0"
    assert parse_store_url("redis+sentinel://s1:26379,s2:26379/main").redacted.startswith("redis+sentinel://")
    with pytest.raises(ValueError, match="store URL"):
        parse_store_url("mysql://x")


async def test_a_malformed_event_on_a_gateway_s_inbox_is_skipped_and_later_ones_still_arrive(gateways):
    a, b = await gateways(2)
    held = await b.enqueue("streaming")
    waiting = await a.enqueue("streaming")
    await a.client.xadd(a.inbox.key, {"k": "assigned", "t": waiting.ticket_id, "ep": "not a number"})
    await a.client.xadd(a.inbox.key, {"k": "cancelled"})
    assert await a.poll_inbox() == 2 and a.inbox.malformed == 2
    assert not waiting.future.done()
    await b.release(held.future.result())
    assert await a.poll_inbox() == 1  # the inbox goes on: the real assignment reaches its waiter
    assert waiting.future.result().epoch == 2
    assert await a.client.xlen(a.inbox.key) == 0  # the bad ones were trimmed with the rest
    assert (await a.status())["malformed_inbox_events"] == 2  # what /health says of the store


async def test_a_client_leaving_mid_enqueue_never_holds_a_worker_through_a_store_restart(
    gateways, own_server, clock
):
    # The fault run of seed 378343257: both live workers busy for good after Redis restarted empty,
    # no gateway opening them. Here: a client leaves while its enqueue is in flight; the store runs
    # it and gives it the worker, and nobody here waits for that worker any more. Before the fix the
    # gateway kept the waiter, took the assignment for it and re-asserted it into the restarted store:
    # the worker stayed busy with a session it never saw, and its own IDLE health did not free it.
    a, b = await gateways(2, url=own_server.url)
    worker = (await a.workers())[0].worker_id
    own_server.pause()  # the enqueue is sent, its reply waits
    try:
        leaving = asyncio.ensure_future(a.enqueue("streaming"))
        await asyncio.sleep(0.2)
        leaving.cancel()  # its client left mid-call
        with pytest.raises(asyncio.CancelledError):
            await leaving
    finally:
        own_server.resume()
    await a.poll_inbox()  # the assignment the store made for it
    await asyncio.sleep(0.2)
    await a.pending.retry()
    clock.now += 1
    own_server.restart_empty()
    assert await a.membership.beat() == "fresh"
    assert await b.membership.beat() == "fresh"
    clock.now += 5
    await b.membership.beat()
    await a.membership.beat()
    await a.membership.reap()  # the hold is over
    assert (await b.register("http://w0", worker))[0] == worker  # it re-registers
    await b.report_health(worker, health(WorkerState.IDLE, epoch=0))  # it never took a session
    assert (await view(b, worker)).state is WorkerState.IDLE
    nxt = await b.enqueue("streaming")  # the next client is served
    assert nxt.future.done() and nxt.future.result().worker_id == worker


async def _stale_assignment(store: RedisStore, worker: str, epoch: int, busy_ms: int) -> None:
    """What a gateway whose view went stale re-asserts: an assignment of ``worker`` (at
    ``http://w0``) at ``epoch``, made at ``busy_ms``, whose session its worker is not in."""
    args = ("t_stale", worker, "http://w0", epoch, "streaming", busy_ms, 1, busy_ms)
    await store.call("reassert", store.gateway_id, 0, 1, *args)


async def test_an_assignment_its_worker_never_took_is_freed_by_its_idle_health_in_bounded_time(
    gateways, clock
):
    (a,) = await gateways(1)
    worker = (await a.workers())[0].worker_id
    await a.report_health(worker, health(epoch=2))  # it has seen epoch 2
    made_ms = round(clock.now * 1000)
    await _stale_assignment(a, worker, 5, made_ms)  # epoch 5: never taken
    assert (await view(a, worker)).state is WorkerState.BUSY_STREAMING
    # young, it may still be on its way to the worker: its IDLE word (epoch 2) does not free it
    await a.report_health(worker, health(epoch=2))
    assert (await view(a, worker)).state is WorkerState.BUSY_STREAMING
    clock.now += UNTAKEN_ASSIGNMENT_S
    await a.report_health(worker, health(epoch=2))  # dead now: the worker's word frees it
    assert (await view(a, worker)).state is WorkerState.IDLE
    assert await a.poll_inbox() == 1  # its gateway hears the ticket is over (a waiter: an error)
    served = await a.enqueue("streaming")
    assert served.future.result().epoch == 6  # newer than any the dead one had


async def test_a_late_release_or_old_health_never_frees_a_worker_a_newer_session_holds(gateways, clock):
    (a,) = await gateways(1)
    first = await a.enqueue("streaming")
    old = first.future.result()
    await a.release(old)
    second = await a.enqueue("streaming")  # the worker's next session, newer epoch
    new = second.future.result()
    assert new.epoch > old.epoch
    await a.pending.run("release", old.worker_id, old.ticket_id, "1", "", "1")  # a late release
    assert (await view(a, new.worker_id)).ticket_id == new.ticket_id
    # a health report from before it took the new session: IDLE with the old epoch
    await a.report_health(new.worker_id, health(epoch=old.epoch))
    assert (await view(a, new.worker_id)).ticket_id == new.ticket_id
    clock.now += UNTAKEN_ASSIGNMENT_S - 1
    await a.report_health(new.worker_id, health(epoch=old.epoch))
    assert (await view(a, new.worker_id)).state is WorkerState.BUSY_STREAMING
    # once it took it, it says busy: however old the assignment, it is held
    clock.now += 60
    await a.report_health(new.worker_id, health(WorkerState.BUSY_STREAMING, epoch=new.epoch))
    assert (await view(a, new.worker_id)).ticket_id == new.ticket_id


async def test_an_epoch_a_restarted_store_gives_again_is_a_new_assignment_not_the_refused_one(
    gateways, own_server, clock
):
    # A worker that could not be reached never saw its assignment's epoch; the store restarted
    # empty learns the worker's epoch from its health and gives the same number again, to the same
    # ticket: a new assignment, not the refused one read late (before the fix it was dropped, the
    # worker held busy for a session nobody opened and the client kept waiting).
    (a,) = await gateways(1, url=own_server.url)
    first = await a.enqueue("streaming")
    refused = first.future.result()
    again = await a.requeue(first, refused, lost=True)  # its worker could not be reached
    assert again is not None and not again.future.done()
    clock.now += 1
    own_server.restart_empty()
    assert await a.membership.beat() == "fresh"  # its waiter is re-asserted in place
    wid, _ = await a.register("http://w0", refused.worker_id)
    await a.report_health(wid, health(epoch=refused.epoch - 1))  # back; it never took that epoch
    clock.now += 5
    await a.membership.beat()
    await a.membership.reap()  # the hold is over: the ticket gets the worker
    await a.poll_inbox()
    assert again.future.done()
    given = again.future.result()
    assert (given.worker_id, given.epoch) == (refused.worker_id, refused.epoch)


async def test_an_assignment_a_restarted_store_made_before_the_gateway_re_asserted_reaches_its_waiter(
    gateways, own_server, clock
):
    # A store restarted empty serves at once until the first gateway beats (it cannot know it
    # restarted before): a ticket queued there meanwhile may get a worker before its gateway
    # re-asserts. That assignment is real (before the fix the gateway set it aside as one the store
    # lost: the worker stayed busy for a session nobody opened, the client kept waiting).
    a, b = await gateways(2, url=own_server.url)
    worker = (await a.workers())[0].worker_id
    clock.now += 1
    own_server.restart_empty()
    wid, _ = await b.register("http://w0", worker)  # the worker's heartbeat: back at once
    await b.report_health(wid, health(epoch=3))
    held = await b.enqueue("streaming")  # nobody has beaten yet: served at once
    mine = await a.enqueue("streaming")
    await b.release(held.future.result())  # the worker goes to A's ticket; A reads it late
    clock.now += 0.5
    assert await a.membership.beat() == "fresh"
    await a.poll_inbox()
    assert mine.future.done() and mine.future.result().worker_id == wid


async def test_a_session_re_asserted_after_its_release_is_freed_by_its_worker_s_idle_health_at_once(
    gateways, own_server, clock
):
    # The release of a session that just ended may reach a store restarted empty before the
    # re-assertion that still held it (sent first, it waits for the script to be loaded again):
    # the worker is restored busy with a session it has finished. Its IDLE health, with that
    # session's epoch, frees it at once.
    a, b = await gateways(2, url=own_server.url)
    session = (await a.enqueue("streaming")).future.result()
    clock.now += 1
    own_server.restart_empty()
    await a.release(session)  # reaches the new store first: nothing to release there
    await _stale_assignment(a, session.worker_id, session.epoch, round(clock.now * 1000))
    assert (await view(a, session.worker_id)).state is WorkerState.BUSY_STREAMING
    await b.report_health(session.worker_id, health(epoch=session.epoch))
    assert (await view(a, session.worker_id)).state is WorkerState.IDLE
