"""PlayClock and EchoReference edge cases, with a fake clock and passthrough (16 kHz) audio so the
reference lines up sample for sample."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.agent.playout import RATE, EchoReference, PlayClock


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def started(now: float = 100.0, sent_ms: float = 10_000.0) -> tuple[Clock, PlayClock]:
    clock = Clock(now)
    play = PlayClock(clock)
    play.start()
    play.sent(sent_ms)
    return clock, play


def ramp(n: int, start: float = 1.0) -> np.ndarray:
    return (np.arange(n, dtype=np.float32) + start) / 10_000


# ---- PlayClock


def test_a_fresh_clock_is_neither_paused_nor_stopped_and_plays_nothing():
    play = PlayClock(Clock())
    assert not play.paused and not play.stopped
    assert play.ahead_ms() == 0.0 and play.played_ms() == 0.0
    assert play.play_at(0) is None


def test_start_is_once():
    clock = Clock()
    play = PlayClock(clock)
    play.start()
    clock.now += 5
    play.start()
    assert play.started_at == 100.0


def test_audio_sent_before_the_start_plays_from_the_start():
    clock = Clock()
    play = PlayClock(clock)
    play.sent(300)
    clock.now += 1
    assert play.played_ms() == 0.0
    play.start()
    clock.now += 0.1
    assert play.played_ms() == pytest.approx(100)
    assert play.ahead_ms() == pytest.approx(200)


def test_ahead_goes_negative_when_sending_falls_behind():
    clock, play = started(sent_ms=100)
    clock.now += 0.5
    assert play.ahead_ms() == pytest.approx(-400)
    assert play.played_ms() == 100


def test_played_is_never_negative_if_the_clock_steps_back():
    clock, play = started()
    clock.now -= 1
    assert play.played_ms() == 0.0


def test_pause_twice_keeps_the_first_offset():
    clock, play = started()
    clock.now += 0.3
    assert play.pause() == pytest.approx(300)
    clock.now += 0.4
    assert play.pause() == pytest.approx(300)


def test_resume_without_a_pause_returns_where_it_is():
    clock, play = started()
    clock.now += 0.2
    assert play.resume() == pytest.approx(200)
    assert play.started_at == 100.0  # not rebased


def test_resume_rebases_the_start():
    clock, play = started()
    clock.now += 0.5
    play.pause()
    clock.now += 2
    play.resume()
    assert play.started_at == pytest.approx(clock.now - 0.5)
    assert play.play_at(500) == pytest.approx(clock.now)
    assert play.play_at(400) == pytest.approx(clock.now - 0.1)


def test_a_paused_clock_still_places_what_played_before_the_pause():
    clock, play = started()
    clock.now += 0.5
    play.pause()
    assert play.play_at(499) == pytest.approx(100.499)
    assert play.play_at(500) is None


def test_stop_while_paused_ends_at_the_pause():
    clock, play = started()
    clock.now += 0.25
    play.pause()
    clock.now += 1
    assert play.stop() == pytest.approx(250)
    assert play.stopped and not play.paused
    clock.now += 1
    assert play.played_ms() == pytest.approx(250)
    assert play.play_at(100) == pytest.approx(100.1)
    assert play.play_at(250) is None


def test_resume_after_a_stop_does_not_play_on():
    clock, play = started()
    clock.now += 0.2
    play.stop()
    clock.now += 1
    assert play.resume() == pytest.approx(200)
    assert play.played_ms() == pytest.approx(200)


def test_a_stop_before_the_start_reached_nothing():
    play = PlayClock(Clock())
    assert play.stop() == 0.0
    assert play.stopped and play.play_at(0) is None


def test_unsent_lowers_what_can_have_played():
    clock, play = started(sent_ms=1000)
    play.unsent(600)
    clock.now += 2
    assert play.played_ms() == pytest.approx(400)


# ---- EchoReference


def test_nothing_added_gives_silence():
    ref = EchoReference()
    out = ref.take(arrival=1.0, n=160)
    assert out.dtype == np.float32 and len(out) == 160 and not out.any()


def test_take_lines_up_sample_for_sample():
    _clock, play = started()
    ref = EchoReference()
    audio = ramp(1600)
    ref.add(play, 0, audio, RATE)
    np.testing.assert_array_equal(ref.take(arrival=100.1, n=1600), audio)


def test_a_window_that_began_before_the_reply_has_its_head_silent():
    _clock, play = started()
    ref = EchoReference()
    audio = ramp(1600)
    ref.add(play, 0, audio, RATE)
    out = ref.take(arrival=100.05, n=1600)  # 99.95 .. 100.05
    assert not out[:800].any()
    np.testing.assert_array_equal(out[800:], audio[:800])


def test_a_window_that_ends_after_the_reply_has_its_tail_silent():
    _clock, play = started()
    ref = EchoReference()
    audio = ramp(1600)
    ref.add(play, 0, audio, RATE)
    out = ref.take(arrival=100.15, n=1600)  # 100.05 .. 100.15
    np.testing.assert_array_equal(out[:800], audio[800:])
    assert not out[800:].any()


def test_chunks_added_in_turn_follow_each_other():
    _clock, play = started()
    ref = EchoReference()
    a, b = ramp(800), ramp(800, start=1000)
    ref.add(play, 0, a, RATE)
    ref.add(play, 999.0, b, RATE)  # the offset of later chunks is the clock's own count
    out = ref.take(arrival=100.1, n=1600)
    np.testing.assert_array_equal(out, np.concatenate([a, b]))


def test_a_later_offset_places_the_first_chunk_later():
    _clock, play = started()
    ref = EchoReference()
    audio = ramp(800)
    ref.add(play, 50.0, audio, RATE)
    out = ref.take(arrival=100.1, n=1600)
    assert not out[:800].any()
    np.testing.assert_array_equal(out[800:], audio)


def test_two_replies_at_once_add_up():
    clock = Clock()
    one, two = PlayClock(clock), PlayClock(clock)
    for p in (one, two):
        p.start()
        p.sent(1000)
    ref = EchoReference()
    ref.add(one, 0, np.full(160, 0.25, np.float32), RATE)
    ref.add(two, 0, np.full(160, 0.5, np.float32), RATE)
    out = ref.take(arrival=100.01, n=160)
    np.testing.assert_allclose(out, 0.75)


def test_audio_of_a_reply_not_yet_started_waits_for_its_start():
    clock = Clock()
    play = PlayClock(clock)
    ref = EchoReference()
    audio = ramp(160)
    ref.add(play, 0, audio, RATE)
    assert not ref.take(arrival=100.01, n=160).any()
    assert ref.held() == 1  # kept: it may still play
    clock.now = 200.0
    play.start()
    play.sent(10)
    np.testing.assert_array_equal(ref.take(arrival=200.01, n=160), audio)


def test_audio_after_a_pause_is_kept_and_plays_after_the_resume():
    clock, play = started()
    ref = EchoReference()
    clock.now += 0.01
    play.pause()  # at 10 ms
    late = ramp(160)
    ref.add(play, 10.0, late, RATE)
    clock.now += 1.0
    assert not ref.take(arrival=clock.now, n=160).any()
    assert ref.held() == 1
    play.resume()
    clock.now += 0.01
    np.testing.assert_array_equal(ref.take(arrival=clock.now, n=160), late)


def test_audio_after_a_stop_is_dropped():
    clock, play = started()
    ref = EchoReference()
    clock.now += 0.01
    reached = play.stop()
    ref.add(play, reached + 1.0, ramp(160), RATE)
    assert not ref.take(arrival=clock.now + 0.01, n=160).any()
    assert ref.held() == 0
    assert ref._tracks == {}  # its resampler and clock with it


def test_played_audio_is_kept_a_few_seconds_then_forgotten():
    _clock, play = started()
    ref = EchoReference()
    ref.add(play, 0, ramp(160), RATE)  # plays 100.00 .. 100.01
    ref.take(arrival=102.9, n=160)
    assert ref.held() == 1
    ref.take(arrival=103.02, n=160)
    assert ref.held() == 0 and ref._tracks == {}


def test_the_reference_resamples_to_its_rate():
    _clock, play = started()
    ref = EchoReference()
    ref.add(play, 0, np.ones(24_000, np.float32), 24_000)  # 1 s at 24 kHz
    out = ref.take(arrival=101.0, n=RATE)
    # soxr holds back its filter delay: most of the second, but not more than it
    assert 0.9 * RATE < np.count_nonzero(out) <= RATE
    assert np.abs(out[RATE // 4 : RATE // 2] - 1).max() < 0.01


def test_a_reference_at_another_rate_counts_its_own_samples():
    _clock, play = started()
    ref = EchoReference(rate=8000)
    audio = ramp(80)
    ref.add(play, 0, audio, 8000)
    np.testing.assert_array_equal(ref.take(arrival=100.01, n=80), audio)
