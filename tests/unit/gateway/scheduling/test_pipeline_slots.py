"""A staged pipeline's session slots bound the voice sessions its workers take: the rest wait."""

from __future__ import annotations

from omnivox.gateway.scheduling.states import WorkerState


async def test_voice_sessions_on_pipeline_workers_wait_for_a_slot(make_pool) -> None:
    pool, workers = make_pool(3, realtime=True)
    for w in workers:
        w.engine = "pipeline"
    pool.set_session_slots(2)
    first, second, third = (pool.enqueue("realtime") for _ in range(3))
    assert first.future.done() and second.future.done()
    assert not third.future.done() and pool.queue_length == 1  # an idle worker, but no slot
    assert pool.slots_used() == 2
    pool.release(first.future.result())
    assert third.future.done()  # the freed slot went to the waiting session
    pool.set_session_slots(None)


async def test_streaming_turns_and_other_engines_take_no_slot(make_pool) -> None:
    pool, (pipe, other) = make_pool(2, realtime=True)
    pipe.engine, other.engine = "pipeline", "cascade"
    pool.set_session_slots(0)
    turn = pool.enqueue("streaming")
    assert turn.future.done()  # a streaming turn holds no ASR slot
    voice = pool.enqueue("realtime")
    assert voice.future.done() and voice.future.result() is other  # not on the slotless pipeline


async def test_more_slots_let_waiting_sessions_through(make_pool) -> None:
    pool, workers = make_pool(2, realtime=True)
    for w in workers:
        w.engine = "pipeline"
    pool.set_session_slots(0)
    waiting = pool.enqueue("realtime")
    assert not waiting.future.done()
    pool.set_session_slots(1)
    assert waiting.future.done() and waiting.future.result().state is WorkerState.DUPLEX_ACTIVE
