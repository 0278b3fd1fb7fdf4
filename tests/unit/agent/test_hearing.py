"""Hearing: jobs kept in the order they came, listener calls run in the input thread, and the busy
time and audio they covered counted for the real-time factor (background ASR work included).
Chunks queued one behind the other are heard in one trip to the input thread: each chunk heard once,
in order, the trip ending at the first chunk something was heard in (or that failed), the rest put
back at the head of the queue; a chunk stays in the backlog until it is done."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from omnivox.agent.hearing import TRIP_MS, Clear, Commit, Configure, Feed, Hearing
from omnivox.agent.threads import SerialThread
from omnivox.core.errors import StageLost
from omnivox.voice.listener import Heard
from omnivox.voice.stack import ASR_RATE


class FakeListener:
    """Hears ``speech_started`` in the first chunk (and in the chunks numbered in ``events_at``),
    fails on the chunks numbered in ``fail_at``; chunks are told apart by their first sample."""

    def __init__(self, events_at: tuple[int, ...] = (0,), fail_at: tuple[int, ...] = ()) -> None:
        self.background_s = 0.0
        self.fed: list[int] = []
        self.marks: list[float] = []
        self.threads: list[str] = []
        self.events_at, self.fail_at = events_at, fail_at
        self.audio_ms = 0.0
        self.pause_started_ms: float | None = None

    def feed(self, audio: np.ndarray, reference: np.ndarray | None = None) -> list[Heard]:
        n = len(self.marks)  # the chunk's place in the stream (a failed one counts too)
        self.threads.append(threading.current_thread().name)
        if n in self.fail_at:
            self.marks.append(-1.0)
            raise StageLost("the asr stage is gone")
        self.fed.append(len(audio))
        self.marks.append(float(audio[0]) if len(audio) else 0.0)
        self.audio_ms += len(audio) * 1000 / ASR_RATE
        return [Heard("speech_started")] if n in self.events_at else []


def chunk(mark: int, ms: int = 40) -> Feed:
    return Feed(np.full(ms * ASR_RATE // 1000, mark, np.float32), float(mark))


def queued(hearing: Hearing) -> list:
    """The queue, a chunk by its arrival (arrays do not compare as values)."""
    return [job.arrival if isinstance(job, Feed) else job for job in hearing.jobs]


@pytest.fixture
def executor():
    with SerialThread("hearing-input") as thread:
        yield thread


async def test_jobs_come_out_in_the_order_they_went_in(executor):
    hearing = Hearing(FakeListener(), executor)
    jobs = [Feed(np.zeros(160, np.float32), 1.0), Commit("e1"), Clear(), Configure(None), Commit(None)]
    for job in jobs:
        hearing.submit(job)
    assert [await hearing.next_job() for _ in jobs] == jobs
    assert not hearing.jobs


async def test_next_job_waits_for_a_job_to_be_submitted(executor):
    hearing = Hearing(FakeListener(), executor)
    waiting = asyncio.ensure_future(hearing.next_job())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    hearing.submit(Commit("e1"))
    assert await asyncio.wait_for(waiting, 1.0) == Commit("e1")


async def test_feeding_runs_in_the_input_thread_and_counts_the_audio(executor):
    listener = FakeListener()
    hearing = Hearing(listener, executor)
    first = await hearing.feed([Feed(np.zeros(ASR_RATE // 2, np.float32), 0.0)])
    second = await hearing.feed([Feed(np.zeros(ASR_RATE // 4, np.float32), 0.0)])
    assert [h.kind for h in first.chunks[0].heard] == ["speech_started"] and second.chunks[0].heard == []
    assert listener.fed == [8000, 4000]
    assert all(name.startswith("hearing-input") for name in listener.threads)
    busy, audio = hearing.take_figures()
    assert audio == pytest.approx(0.75) and busy >= 0.0


async def test_a_trip_takes_the_chunks_queued_behind_the_first_up_to_a_non_audio_job(executor):
    hearing = Hearing(FakeListener(), executor)
    for job in [chunk(1), chunk(2), chunk(3), Commit("e1"), chunk(4)]:
        hearing.submit(job)
    first = await hearing.next_job()
    assert isinstance(first, Feed)
    assert [f.arrival for f in hearing.take_feeds(first)] == [1.0, 2.0, 3.0]
    assert queued(hearing) == [Commit("e1"), 4.0]


async def test_a_trip_holds_at_most_trip_ms_of_audio(executor):
    hearing = Hearing(FakeListener(), executor)
    per_trip = TRIP_MS // 40
    for mark in range(1, 2 * per_trip + 2):
        hearing.submit(chunk(mark))
    sizes = []
    while hearing.jobs:
        first = await hearing.next_job()
        assert isinstance(first, Feed)
        sizes.append(len(hearing.take_feeds(first)))
    assert sizes == [per_trip, per_trip, 1]


async def test_every_chunk_is_heard_once_in_order_and_a_trip_stops_where_something_was_heard(executor):
    listener = FakeListener(events_at=(2, 5))
    hearing = Hearing(listener, executor)
    for mark in range(1, 9):
        hearing.submit(chunk(mark))
    trips = []
    while hearing.jobs:
        first = await hearing.next_job()
        assert isinstance(first, Feed)
        trip = await hearing.feed(hearing.take_feeds(first))
        for heard in trip.chunks:
            hearing.done(heard.feed)
        trips.append([(c.feed.arrival, len(c.heard)) for c in trip.chunks])
    assert listener.marks == [1, 2, 3, 4, 5, 6, 7, 8]  # each once, in order
    # the trip ends with the chunk the listener heard something in; the rest wait for the next one
    assert trips == [[(1, 0), (2, 0), (3, 1)], [(4, 0), (5, 0), (6, 1)], [(7, 0), (8, 0)]]
    assert hearing.queued_samples == 0 and hearing.backlog_ms == 0.0


async def test_each_chunk_heard_carries_where_the_listener_stood_after_it(executor):
    listener = FakeListener(events_at=())
    hearing = Hearing(listener, executor)
    trip = await hearing.feed([chunk(1), chunk(2), chunk(3)])
    assert [c.audio_ms for c in trip.chunks] == [40.0, 80.0, 120.0]


async def test_a_chunk_that_fails_ends_the_trip_with_its_error_and_the_rest_are_heard_next(executor):
    listener = FakeListener(events_at=(), fail_at=(1,))
    hearing = Hearing(listener, executor)
    feeds = [chunk(1), chunk(2), chunk(3), chunk(4)]
    for feed in feeds:
        hearing.submit(feed)
    first = await hearing.next_job()
    assert isinstance(first, Feed)
    trip = await hearing.feed(hearing.take_feeds(first))
    assert [c.feed.arrival for c in trip.chunks] == [1.0] and isinstance(trip.error, StageLost)
    assert queued(hearing) == [3.0, 4.0]  # the failed chunk is not heard again
    # still waiting until done: the two heard (one failed) and the two put back
    assert hearing.backlog_ms == pytest.approx(160.0)
    for feed in feeds[:2]:
        hearing.done(feed)
    first = await hearing.next_job()
    assert isinstance(first, Feed)
    rest = await hearing.feed(hearing.take_feeds(first))
    assert [c.feed.arrival for c in rest.chunks] == [3.0, 4.0] and rest.error is None
    assert listener.marks == [1.0, -1.0, 3.0, 4.0]


async def test_a_chunk_waits_in_the_backlog_until_it_is_done(executor):
    hearing = Hearing(FakeListener(events_at=()), executor)
    hearing.submit(chunk(1, ms=100))
    first = await hearing.next_job()
    assert isinstance(first, Feed)
    await hearing.feed(hearing.take_feeds(first))
    assert hearing.backlog_ms == pytest.approx(100.0)
    hearing.done(first)
    assert hearing.backlog_ms == 0.0


async def test_a_take_resets_the_figures(executor):
    hearing = Hearing(FakeListener(), executor)
    await hearing.feed([Feed(np.zeros(ASR_RATE, np.float32), 0.0)])
    hearing.take_figures()
    assert hearing.take_figures() == (0.0, 0.0)


async def test_background_work_is_counted_once_at_the_next_take(executor):
    listener = FakeListener()
    listener.background_s = 5.0  # before the session: not this session's work
    hearing = Hearing(listener, executor)
    listener.background_s = 5.5
    busy, audio = hearing.take_figures()
    assert busy == pytest.approx(0.5) and audio == 0.0
    listener.background_s = 5.75
    assert hearing.take_figures()[0] == pytest.approx(0.25)
    assert hearing.take_figures() == (0.0, 0.0)


async def test_run_passes_arguments_and_returns_the_result(executor):
    hearing = Hearing(FakeListener(), executor)
    total, thread = await hearing.run(lambda a, b: (a + b, threading.current_thread().name), 2, 3)
    assert total == 5 and thread.startswith("hearing-input")


async def test_an_error_in_the_input_thread_reaches_the_caller(executor):
    def broken() -> None:
        raise ValueError("model fault")

    with pytest.raises(ValueError, match="model fault"):
        await Hearing(FakeListener(), executor).run(broken)


def test_jobs_are_values():
    assert Commit("e") == Commit("e") and Clear() == Clear(None) and Configure(None) == Configure(None)
    with pytest.raises(AttributeError):
        Commit("e").tag = "other"  # frozen


def test_a_denoise_job_gives_the_listener_a_fresh_suppressor_or_none(executor):
    from omnivox.agent.hearing import Denoise
    from omnivox.voice.noise.suppressor import NoiseSuppressor

    listener = FakeListener()
    listener.noise = None  # type: ignore[attr-defined]
    hearing = Hearing(listener, executor)  # type: ignore[arg-type]
    hearing.set_noise(Denoise("far_field"))
    first = listener.noise  # type: ignore[attr-defined]
    assert isinstance(first, NoiseSuppressor) and first.kind == "far_field"
    hearing.set_noise(Denoise("far_field"))
    assert listener.noise is not first  # type: ignore[attr-defined]
    hearing.set_noise(Denoise(None))
    assert listener.noise is None  # type: ignore[attr-defined]
