"""The server's model of the reply's playback, and the echo reference it gives the canceller."""

from __future__ import annotations

import numpy as np
import pytest

from omnivox.voice.echo.reference import EchoReference, PlayClock


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_playback_runs_in_real_time_and_never_ahead_of_what_was_sent() -> None:
    clock = Clock()
    play = PlayClock(clock)
    assert play.played_ms() == 0 and play.play_at(0) is None  # not started
    play.start()
    play.sent(500)
    clock.now += 0.2
    assert play.played_ms() == pytest.approx(200) and play.ahead_ms() == pytest.approx(300)
    clock.now += 1.0
    assert play.played_ms() == 500  # it ran out of audio
    assert play.play_at(100) == pytest.approx(100.1)


def test_a_pause_freezes_it_and_a_resume_plays_on_from_there() -> None:
    clock = Clock()
    play = PlayClock(clock)
    play.start()
    play.sent(2000)
    clock.now += 0.5
    assert play.pause() == pytest.approx(500) and play.paused
    clock.now += 3.0
    assert play.played_ms() == pytest.approx(500) and play.play_at(800) is None  # not while paused
    assert play.resume() == pytest.approx(500)
    clock.now += 0.25
    assert play.played_ms() == pytest.approx(750)
    assert play.stop() == pytest.approx(750) and play.stopped and play.play_at(900) is None


def test_unsent_audio_is_taken_back() -> None:
    play = PlayClock(Clock())
    play.sent(1000)
    play.unsent(400)
    play.unsent(5000)
    assert play.sent_ms == 0


def test_the_reference_is_the_reply_audio_that_played_while_the_microphone_heard() -> None:
    clock = Clock()
    play = PlayClock(clock)
    ref = EchoReference()
    tone = np.sin(np.arange(16000) / 5).astype(np.float32)  # 1 s at 16 kHz
    play.start()
    play.sent(1000)
    ref.add(play, 0, tone, 16000)
    clock.now += 1.0
    # the microphone's last 0.5 s heard the second half of the reply
    heard = ref.take(arrival=clock.now, n=8000)
    lead = np.argmax(np.abs(heard) > 0)  # the resampler's delay aside, it lines up
    assert np.abs(heard[lead + 100 : lead + 7000] - tone[8000 + 100 : 15000]).max() < 0.05 or lead < 8000
    assert np.abs(heard).max() > 0.5
    # before the reply began: silence
    assert not ref.take(arrival=clock.now - 2.0, n=8000).any()


def test_a_stopped_reply_is_forgotten_once_its_echo_can_no_longer_come() -> None:
    clock = Clock()
    play = PlayClock(clock)
    ref = EchoReference()
    play.start()
    play.sent(1000)
    ref.add(play, 0, np.ones(16000, np.float32), 16000)
    clock.now += 0.1
    play.stop()
    clock.now += 1.0
    assert not ref.take(arrival=clock.now, n=1600).any()  # nothing played after the stop
    clock.now += 3.0  # kept a few seconds (a late echo of what did play), then forgotten
    ref.take(arrival=clock.now, n=1600)
    assert ref._pieces == []
