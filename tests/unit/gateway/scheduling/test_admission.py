"""Admission: a session gets a worker at once or waits hearing its place; a client that leaves, a
ticket cancelled, a wait that runs out, and a waiter cancelled as it is served all give back what
they hold; one notifier round tells each waiter its place only when it moved or went quiet."""

from __future__ import annotations

import asyncio

import pytest

from omnivox.core.errors import (
    InvalidResumeToken,
    QueueFull,
    SessionLimitReached,
    TicketCancelled,
    WorkerUnavailable,
)
from omnivox.gateway.edges.sessions import SessionRecord, SessionState
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.admission import Admission, ClientGone
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.protocol.control.queue import QueueNotice
from stores import view


class Notices(list):
    def __call__(self, notice: QueueNotice) -> None:
        self.append(notice)

    @property
    def kinds(self) -> list[str]:
        return [n.kind for n in self]


def record() -> SessionRecord:
    return SessionRecord(kind="streaming", client_session_id="c", started_at=0.0)


async def settle(admission: Admission, waiting: int = 1) -> None:
    """Until ``waiting`` clients wait in the queue hearing their place (a store that awaits the
    network takes a few round trips to get there)."""
    for _ in range(1000):
        if len(admission._watching) == waiting:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{len(admission._watching)} waiting, not {waiting}")


async def test_a_free_worker_is_had_at_once(make_store):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    notes, rec = Notices(), record()
    worker, ticket = await admission.acquire("streaming", asyncio.Event(), notes, record=rec)
    assert worker.worker_id == w and ticket.worker_id == w
    (done,) = notes
    assert done.kind == "queue_done" and done.worker_id == w and done.was_queued is False
    assert done.waited_s == 0.0
    assert rec.state is SessionState.ACTIVE and rec.worker_id == w and rec.ticket_id == ticket.ticket_id


async def test_the_queue_wait_is_observed_in_the_metrics(make_store):
    store, _ = await make_store(1)
    metrics = GatewayMetrics()
    await Admission(store, metrics).acquire("streaming", asyncio.Event(), Notices())
    text = metrics.render().decode()
    assert 'omnivox_queue_wait_seconds_count{task_type="streaming"} 1.0' in text


async def test_a_waiter_hears_its_place_then_gets_the_freed_worker(make_store, clock):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    holder, _ = await admission.acquire("streaming", asyncio.Event(), Notices())
    notes, rec = Notices(), record()
    task = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), notes, record=rec))
    await settle(admission)
    (queued,) = notes
    assert queued.kind == "queued" and queued.position == 1 and queued.queue_length == 1
    assert queued.estimated_wait_s == 20.0 and rec.state is SessionState.QUEUED
    clock.now += 3.0
    await store.release(holder)
    worker, _ = await asyncio.wait_for(task, 5)
    assert worker.worker_id == w and notes.kinds == ["queued", "queue_done"]
    assert notes[-1].was_queued is True and notes[-1].waited_s == 3.0 and rec.state is SessionState.ACTIVE


async def test_a_client_that_leaves_while_queued_gives_its_place_up(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    await admission.acquire("streaming", asyncio.Event(), Notices())
    gone, rec = asyncio.Event(), record()
    task = asyncio.ensure_future(admission.acquire("streaming", gone, Notices(), record=rec))
    await settle(admission)
    assert await store.queue_length() == 1
    gone.set()
    with pytest.raises(ClientGone):
        await asyncio.wait_for(task, 5)
    assert await store.queue_length() == 0 and rec.state is SessionState.IDLE and admission._watching == {}


async def test_a_turn_whose_client_already_left_is_never_handed_a_worker(make_store):
    """Issue 25 finding 5: a streaming turn read from the inbox after its client left took the idle
    worker all the same."""
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    gone, rec = asyncio.Event(), record()
    gone.set()
    with pytest.raises(ClientGone):
        await admission.acquire("streaming", gone, Notices(), record=rec)
    assert rec.state is SessionState.IDLE
    worker, _ = await admission.acquire("streaming", asyncio.Event(), Notices())  # still free
    assert worker.worker_id == w


async def test_a_client_that_leaves_as_its_worker_is_assigned_gives_the_worker_back(make_store):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    holder, _ = await admission.acquire("streaming", asyncio.Event(), Notices())
    gone = asyncio.Event()
    task = asyncio.ensure_future(admission.acquire("streaming", gone, Notices()))
    await settle(admission)
    gone.set()  # in the same step as the worker is freed for it
    await store.release(holder)
    with pytest.raises(ClientGone):
        await asyncio.wait_for(task, 5)
    worker, _ = await asyncio.wait_for(admission.acquire("streaming", asyncio.Event(), Notices()), 5)
    assert worker.worker_id == w


async def test_a_wait_that_runs_out_is_a_session_limit(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    await admission.acquire("streaming", asyncio.Event(), Notices())
    with pytest.raises(SessionLimitReached) as caught:
        await admission.acquire("streaming", asyncio.Event(), Notices(), max_wait_s=0.01)
    assert caught.value.details == {"waited_s": 0.01} and await store.queue_length() == 0


async def test_a_cancelled_ticket_reaches_its_waiter(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    await admission.acquire("streaming", asyncio.Event(), Notices())
    notes, rec = Notices(), record()
    task = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), notes, record=rec))
    await settle(admission)
    await store.cancel(notes[0].ticket_id)
    with pytest.raises(TicketCancelled):
        await asyncio.wait_for(task, 5)
    assert rec.state is SessionState.IDLE


async def test_refusals_at_the_door_leave_the_record_idle(make_store):
    store, _ = await make_store(1, max_queue=0)
    admission = Admission(store, GatewayMetrics())
    await admission.acquire("streaming", asyncio.Event(), Notices())
    rec = record()
    with pytest.raises(QueueFull):
        await admission.acquire("streaming", asyncio.Event(), Notices(), record=rec)
    assert rec.state is SessionState.IDLE
    with pytest.raises(WorkerUnavailable):
        await admission.acquire("audio_duplex", asyncio.Event(), Notices(), record=rec)
    assert rec.state is SessionState.IDLE


async def test_a_waiter_cancelled_while_queued_cancels_its_ticket(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    await admission.acquire("streaming", asyncio.Event(), Notices())
    task = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), Notices()))
    await settle(admission)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.queue_length() == 0 and admission._watching == {}


# only in memory can the test cancel a waiter in the very step its ticket is assigned (a store that
# awaits the network lets the waiter run first); the store contract's withdraw test covers both
@pytest.mark.parametrize("make_store", ["memory"], indirect=True)
async def test_a_waiter_cancelled_in_the_step_it_was_served_gives_the_worker_back(make_store):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics())
    holder, _ = await admission.acquire("streaming", asyncio.Event(), Notices())
    task = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), Notices()))
    await settle(admission)
    await store.release(holder)  # the ticket is assigned now ...
    assert (await view(store, w)).state is WorkerState.BUSY_STREAMING
    task.cancel()  # ... and its waiter goes before it could take the worker
    with pytest.raises(asyncio.CancelledError):
        await task
    shown = await view(store, w)
    assert shown.state is WorkerState.IDLE and shown.ticket_id is None


async def test_a_notifier_round_tells_only_those_who_moved(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics(), interval_s=1000.0)
    await admission.acquire("streaming", asyncio.Event(), Notices())
    first, second = Notices(), Notices()
    tasks = [
        asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), n)) for n in (first, second)
    ]
    await settle(admission, 2)
    assert first.kinds == second.kinds == ["queued"] and second[0].position == 2
    await admission.notify_round()  # nobody moved, nobody went quiet long enough
    assert len(first) == len(second) == 1
    await store.cancel(first[0].ticket_id)
    await admission.notify_round()
    assert second.kinds == ["queued", "queue_update"]
    assert second[-1].position == 1 and second[-1].queue_length == 1
    await admission.notify_round()  # said once
    assert len(second) == 2
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_quiet_waiter_hears_again_after_the_interval(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics(), interval_s=0.0)
    await admission.acquire("streaming", asyncio.Event(), Notices())
    notes = Notices()
    task = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), notes))
    await settle(admission)
    await admission.notify_round()
    await admission.notify_round()
    assert notes.kinds == ["queued", "queue_update", "queue_update"]
    assert all(n.position == 1 for n in notes)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# ---- resume: a client that comes back takes its place again


async def test_a_client_that_comes_back_with_its_token_takes_its_old_place(make_store):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics(), resume_grace_s=10)
    holder, _ = await admission.acquire("streaming", asyncio.Event(), Notices())
    gone, first_notes = asyncio.Event(), Notices()
    first = asyncio.ensure_future(admission.acquire("streaming", gone, first_notes))
    await settle(admission)
    behind_notes = Notices()
    behind = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), behind_notes))
    await settle(admission, 2)
    token = first_notes[0].resume_token
    assert token is not None and first_notes[0].position == 1
    gone.set()  # its connection drops
    with pytest.raises(ClientGone):
        await asyncio.wait_for(first, 5)
    assert await store.queue_length() == 1  # out of the line meanwhile: nobody waits behind it
    back_notes = Notices()
    back = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), back_notes, resume=token))
    await settle(admission, 2)
    assert back_notes[0].kind == "queued" and back_notes[0].resumed and back_notes[0].position == 1
    await store.release(holder)
    worker, ticket = await asyncio.wait_for(back, 5)
    assert worker.worker_id == w and ticket.ticket_id == first_notes[0].ticket_id
    assert not behind.done()
    behind.cancel()
    with pytest.raises(asyncio.CancelledError):
        await behind


async def test_a_place_is_one_connection_s_a_spent_token_queues_anew_a_forged_one_is_refused(
    make_store,
):
    store, (w,) = await make_store(1)
    admission = Admission(store, GatewayMetrics(), resume_grace_s=10)
    holder, _ = await admission.acquire("streaming", asyncio.Event(), Notices())
    gone, notes = asyncio.Event(), Notices()
    task = asyncio.ensure_future(admission.acquire("streaming", gone, notes))
    await settle(admission)
    token = notes[0].resume_token
    gone.set()
    with pytest.raises(ClientGone):
        await task
    again = Notices()
    taken = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), again, resume=token))
    await settle(admission)
    newer = Notices()
    latest = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), newer, resume=token))
    with pytest.raises(TicketCancelled):  # the newest connection holds the place
        await asyncio.wait_for(taken, 5)
    await settle(admission)
    assert again[0].resumed and newer[0].resumed and newer[0].position == 1
    await store.release(holder)
    worker, ticket = await asyncio.wait_for(latest, 5)
    assert worker.worker_id == w and ticket.ticket_id == notes[0].ticket_id
    spent = Notices()
    late = asyncio.ensure_future(admission.acquire("streaming", asyncio.Event(), spent, resume=token))
    await settle(admission)
    assert not spent[0].resumed and spent[0].ticket_id != notes[0].ticket_id  # served: a new place
    forged = token[:-1] + ("0" if token[-1] != "0" else "1")
    for bad in (forged, "t_x", "é" * 40, "t_" + "9" * 5000):
        with pytest.raises(InvalidResumeToken):
            await admission.acquire("streaming", asyncio.Event(), Notices(), resume=bad)
    late.cancel()
    await asyncio.gather(late, return_exceptions=True)


async def test_without_resume_a_client_that_leaves_gives_its_place_up_and_gets_no_token(make_store):
    store, _ = await make_store(1)
    admission = Admission(store, GatewayMetrics(), resume_grace_s=0)
    await admission.acquire("streaming", asyncio.Event(), Notices())
    gone, notes = asyncio.Event(), Notices()
    task = asyncio.ensure_future(admission.acquire("streaming", gone, notes))
    await settle(admission)
    assert notes[0].resume_token is None
    gone.set()
    with pytest.raises(ClientGone):
        await task
    assert await store.reattach(notes[0].ticket_id, "streaming") is None
