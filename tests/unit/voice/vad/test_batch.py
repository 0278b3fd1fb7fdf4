"""Several streams' VAD windows in one model call: each stream's scores as alone (its recurrent
state its row), one stream's bad audio or failed call never costs the others, a lone stream scored
at once, and a stream that ends holds nothing."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

from omnivox.core.errors import InvalidAudio
from omnivox.voice.vad.batch import SileroBatch, _Ask
from omnivox.voice.vad.silero import SileroModel, SileroVad


class HeldModel:
    """The real model, whose first call waits until ``release``: the threads that ask meanwhile
    queue, and the next call takes them all at once."""

    def __init__(self) -> None:
        self.model = SileroModel.shared()
        self.release = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []  # streams in each call
        self.fail_rate: int | None = None  # calls at this rate raise

    def run(self, inputs: np.ndarray, state: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
        if not self.batches:
            self.entered.set()
            self.release.wait(10)
        self.batches.append(len(inputs))
        if rate == self.fail_rate:
            raise RuntimeError("the model failed")
        return self.model.run(inputs, state, rate)


def asking(batch: SileroBatch, n: int) -> None:
    """Wait until ``n`` streams are queued behind the held call."""
    deadline = time.monotonic() + 10
    while batch.asking < n:
        assert time.monotonic() < deadline, "the streams never asked"
        time.sleep(0.001)


def scored_together(
    batch: SileroBatch,
    held: HeldModel,
    clips: list[np.ndarray],
    vads: list[SileroVad],
    asks: int | None = None,
) -> list:
    """Each clip through its stream's ``process`` in a thread of its own, all asking (``asks`` of
    them: all by default) while a call holds the model, so that the next call scores them together;
    returns each stream's scores (or its error)."""
    results: list = [None] * len(clips)
    held_vad = SileroVad(16000, batch, silent=False)  # (zeros would not reach the model)
    holder = threading.Thread(target=held_vad.process, args=(np.zeros(512, np.float32),))
    holder.start()
    assert held.entered.wait(10)

    def hear(i: int) -> None:
        try:
            results[i] = vads[i].process(clips[i])
        except Exception as error:  # (the test reads it)
            results[i] = error

    threads = [threading.Thread(target=hear, args=(i,)) for i in range(len(clips))]
    for t in threads:
        t.start()
    asking(batch, len(clips) if asks is None else asks)
    held.release.set()
    for t in [holder, *threads]:
        t.join(10)
    return results


@pytest.fixture
def clips(weather_16k, espeak) -> list[np.ndarray]:
    noise = np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32)
    other = espeak("book a table for two at eight")
    return [weather_16k, other[:30000], np.concatenate([noise, weather_16k[:9000]])]


def alone(clip: np.ndarray) -> np.ndarray:
    return SileroVad(16000, SileroBatch(SileroModel.shared())).process(clip)


def test_three_streams_scored_together_get_their_scores_alone(clips) -> None:
    held = HeldModel()
    batch = SileroBatch(held)
    vads = [SileroVad(16000, batch) for _ in clips]
    together = scored_together(batch, held, clips, vads)
    assert held.batches[1] == 3  # after the held call, the three streams share each call
    assert max(held.batches) == 3 and batch.rows == sum(held.batches)
    for clip, probs in zip(clips, together, strict=True):
        assert len(probs) == len(clip) // 512
        assert np.allclose(probs, alone(clip), atol=1e-5)
    # each stream's state is its own after the call too: their next windows score as alone
    more = [clip[:4096] for clip in clips]
    for clip, first, vad, tail in zip(clips, together, vads, more, strict=True):
        rest = vad.process(tail)
        whole = alone(np.concatenate([clip, tail]))
        assert np.allclose(rest, whole[len(first) :], atol=1e-5)


def test_one_streams_bad_audio_stays_in_its_row(clips) -> None:
    """Samples far out of range reach the model (and say nothing) in their own row; NaN is refused
    before its stream asks. Neither changes a score of the others'."""
    held = HeldModel()
    batch = SileroBatch(held)
    wild = np.full(8192, 3e38, np.float32)
    nan = np.full(8192, np.nan, np.float32)
    vads = [SileroVad(16000, batch) for _ in range(4)]
    together = scored_together(batch, held, [clips[0], wild, nan, clips[1]], vads, asks=3)
    assert held.batches[1] == 3
    assert np.allclose(together[0], alone(clips[0]), atol=1e-5)
    assert np.allclose(together[3], alone(clips[1]), atol=1e-5)
    assert len(together[1]) == 16
    assert isinstance(together[2], InvalidAudio)


def test_a_failed_call_fails_only_its_streams_and_the_batch_goes_on(clips) -> None:
    held = HeldModel()
    held.fail_rate = 8000
    batch = SileroBatch(held)
    vads = [SileroVad(16000, batch), SileroVad(8000, batch)]
    together = scored_together(batch, held, [clips[0], clips[1][::2].copy()], vads)
    assert np.allclose(together[0], alone(clips[0]), atol=1e-5)
    assert isinstance(together[1], RuntimeError)
    held.fail_rate = None
    assert len(vads[1].process(clips[1][::2].copy())) > 0  # nothing is left busy or queued
    assert batch.asking == 0


def test_streams_that_come_and_go_at_random_each_get_their_scores_alone(clips) -> None:
    """Four threads feeding 40 ms chunks at once (calls alone, batched, and every moment between):
    none is left waiting, and each stream's scores are its own."""
    batch = SileroBatch(SileroModel.shared())
    streams = [*clips, clips[0][::-1].copy()]
    results: list = [None] * len(streams)

    silent = [0] * len(streams)  # windows of zeros scored without the model

    def feed(i: int) -> None:
        vad = SileroVad(16000, batch)
        results[i] = np.concatenate(
            [vad.process(streams[i][j : j + 640]) for j in range(0, len(streams[i]), 640)]
        )
        silent[i] = vad.silent_windows

    threads = [threading.Thread(target=feed, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a stream was left waiting"
    for clip, probs in zip(streams, results, strict=True):
        assert np.allclose(probs, alone(clip), atol=1e-5)
    assert batch.asking == 0 and batch.rows + sum(silent) == sum(len(p) for p in results)


def test_a_stream_that_asks_as_a_call_ends_scores_the_ones_still_waiting(clips) -> None:
    """The moment between a call's end and its waiters waking: a stream that asks then finds others
    waiting and no call running; it scores them with its own (nobody is left waiting)."""
    batch = SileroBatch(SileroModel.shared())
    waiting, newcomer = SileroVad(16000, batch), SileroVad(16000, batch)
    ask = _Ask(waiting, clips[0][:1024].reshape(2, 512))
    batch._asks.append(ask)  # (as a waiter not yet woken leaves it)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(newcomer.process(clips[1][:1024])), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the newcomer waited for a call that nobody runs"
    assert ask.done and np.allclose(ask.probs, alone(clips[0][:1024]), atol=1e-5)
    assert np.allclose(result[0], alone(clips[1][:1024]), atol=1e-5)


def test_a_lone_stream_is_scored_at_once_one_window_a_call(weather_16k) -> None:
    batch = SileroBatch(SileroModel.shared())
    probs = SileroVad(16000, batch).process(weather_16k)
    assert batch.calls == batch.rows == len(probs) == len(weather_16k) // 512


def test_a_stream_that_ends_holds_nothing(weather_16k) -> None:
    batch = SileroBatch(SileroModel.shared())
    vad = SileroVad(16000, batch)
    vad.process(weather_16k)
    gone = weakref.ref(vad)
    del vad
    gc.collect()
    assert gone() is None and batch.asking == 0
