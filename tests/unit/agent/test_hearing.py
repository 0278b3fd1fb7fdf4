"""Hearing: jobs kept in the order they came, listener calls run in the input thread, and the busy
time and audio they covered counted for the real-time factor (background ASR work included)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from omnivox.agent.hearing import Clear, Commit, Configure, Feed, Hearing
from omnivox.voice.listener import Heard
from omnivox.voice.stack import ASR_RATE


class FakeListener:
    def __init__(self) -> None:
        self.background_s = 0.0
        self.fed: list[int] = []
        self.threads: list[str] = []

    def feed(self, audio: np.ndarray, reference: np.ndarray | None = None) -> list[Heard]:
        self.fed.append(len(audio))
        self.threads.append(threading.current_thread().name)
        return [Heard("speech_started")] if len(self.fed) == 1 else []


@pytest.fixture
def executor():
    with ThreadPoolExecutor(1, thread_name_prefix="hearing-input") as pool:
        yield pool


async def test_jobs_come_out_in_the_order_they_went_in(executor):
    hearing = Hearing(FakeListener(), executor)
    jobs = [Feed(np.zeros(160, np.float32), 1.0), Commit("e1"), Clear(), Configure(None), Commit(None)]
    for job in jobs:
        hearing.submit(job)
    assert [hearing.jobs.get_nowait() for _ in jobs] == jobs
    assert hearing.jobs.empty()


async def test_feeding_runs_in_the_input_thread_and_counts_the_audio(executor):
    listener = FakeListener()
    hearing = Hearing(listener, executor)
    first = await hearing.feed(Feed(np.zeros(ASR_RATE // 2, np.float32), 0.0))
    second = await hearing.feed(Feed(np.zeros(ASR_RATE // 4, np.float32), 0.0))
    assert [h.kind for h in first] == ["speech_started"] and second == []
    assert listener.fed == [8000, 4000]
    assert all(name.startswith("hearing-input") for name in listener.threads)
    busy, audio = hearing.take_figures()
    assert audio == pytest.approx(0.75) and busy >= 0.0


async def test_a_take_resets_the_figures(executor):
    hearing = Hearing(FakeListener(), executor)
    await hearing.feed(Feed(np.zeros(ASR_RATE, np.float32), 0.0))
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
