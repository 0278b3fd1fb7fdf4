"""A turn's breakdown: the stages as times after the speech's end, their steps adding up to the last."""

from __future__ import annotations

import pytest

from omnivox.agent.breakdown import STAGES, StageTimes, steps


def test_the_stages_are_times_after_the_end_of_the_speech() -> None:
    marks = StageTimes(10.0, 10.05, 10.5, 10.6, 10.7, 10.75, 10.9, 10.95).marks()
    assert list(marks) == list(STAGES)
    assert marks["decided"] == pytest.approx(0.5) and marks["first_audio_sent"] == pytest.approx(0.95)


def test_the_steps_add_up_to_the_voice_to_voice_even_when_a_prepared_reply_began_early() -> None:
    # prepared in the pause: the LLM's first token came before the turn was decided
    marks = StageTimes(0.0, 0.04, 0.52, 0.6, 0.3, 0.45, 0.58, 0.61).marks()
    by_stage = steps(marks)
    assert by_stage["llm_first_token"] == pytest.approx(-0.3)  # before the final transcript
    assert sum(by_stage.values()) == pytest.approx(0.61) == marks["first_audio_sent"]


def test_stages_not_passed_are_left_out_and_no_speech_means_no_breakdown() -> None:
    assert StageTimes(first_audio_sent=3.0).marks() == {}  # a reply no speech prompted
    partial = StageTimes(1.0, llm_first_token=1.2, first_audio_sent=1.5).marks()
    assert partial == {"llm_first_token": pytest.approx(0.2), "first_audio_sent": pytest.approx(0.5)}
    assert sum(steps(partial).values()) == pytest.approx(0.5)


def test_a_reply_takes_the_hearing_stages_of_its_turn_and_keeps_its_own() -> None:
    reply = StageTimes(first_audio_sent=2.0)
    reply.hearing_from(StageTimes(1.0, 1.1, 1.5, 1.6))
    assert (reply.noticed, reply.decided, reply.transcribed, reply.first_audio_sent) == (1.1, 1.5, 1.6, 2.0)
    assert reply.speech_end is None  # the reply's own (set when its first audio goes out)
