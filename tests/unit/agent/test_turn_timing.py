"""The hearing's side of a turn's breakdown, with a fake clock: the pause noticed, the turn decided,
its final transcript, given to the reply that answers that turn."""

from __future__ import annotations

from omnivox.agent.breakdown import StageTimes
from omnivox.agent.events import SpeechStopped
from omnivox.agent.turn_timing import TurnTimer
from omnivox.agent.turns import CommitTurn, Emit
from omnivox.voice.listener import Heard


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_pause_seen_chunks_before_the_turn_ended_is_when_it_was_noticed() -> None:
    clock = Clock(10.0)
    timer = TurnTimer(clock)
    timer.chunk(None)  # speaking
    clock.now = 10.1
    timer.chunk(2000.0)  # the pause began at 2000 ms of audio: noticed now
    clock.now = 10.3
    timer.chunk(2000.0)  # the same pause, still running
    stopped = Heard("speech_stopped", 2000.0, at=10.6)
    timer.heard(stopped, [Emit(SpeechStopped("turn_1", 2000.0))])
    timer.heard(Heard("final", 2600.0, "hello", at=10.75), [CommitTurn("turn_1", "hello", True, 10.02)])
    times = StageTimes()
    timer.fill(10.02, times)
    assert (times.noticed, times.decided, times.transcribed) == (10.1, 10.6, 10.75)
    other = StageTimes()
    timer.fill(9.0, other)  # a reply no turn of these prompted (the adapter's own)
    assert other == StageTimes()


def test_a_pause_begun_and_judged_in_one_chunk_was_noticed_when_it_was_decided() -> None:
    timer = TurnTimer(Clock(5.0))
    timer.chunk(100.0)  # an earlier pause, which the user spoke on after
    timer.chunk(None)
    timer.heard(Heard("speech_stopped", 900.0, at=5.4), [])
    timer.heard(Heard("final", 1400.0, "yes", at=5.5), [CommitTurn("turn_2", "yes", True, 4.9)])
    times = StageTimes()
    timer.fill(4.9, times)
    assert (times.noticed, times.decided, times.transcribed) == (5.4, 5.4, 5.5)


def test_a_turn_not_answered_or_a_commit_by_hand_has_no_hearing_stages() -> None:
    timer = TurnTimer(Clock(1.0))
    timer.heard(Heard("final", 500.0, "hi", at=1.2), [CommitTurn("turn_3", "hi")])  # no speech_stopped
    times = StageTimes()
    timer.fill(None, times)
    assert times == StageTimes()
