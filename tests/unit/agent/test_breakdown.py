"""A turn's breakdown: the stages as times after the speech's end, their steps adding up to the last."""

from __future__ import annotations

import pytest

from omnivox.agent.breakdown import STAGES, StageTimes, TurnBreakdown


def test_the_stages_are_times_after_the_end_of_the_speech() -> None:
    times = StageTimes(10.0, 10.05, 10.5, 10.6, 10.7, 10.75, 10.9, 10.95)
    breakdown = times.breakdown()
    assert breakdown is not None
    assert list(breakdown.marks()) == list(STAGES)
    assert breakdown.decided == pytest.approx(0.5) and breakdown.first_audio_sent == pytest.approx(0.95)


def test_the_steps_add_up_to_the_voice_to_voice_even_when_a_prepared_reply_began_early() -> None:
    # prepared in the pause: the LLM's first token came before the turn was decided
    breakdown = TurnBreakdown(0.04, 0.52, 0.6, 0.3, 0.45, 0.58, 0.61)
    steps = breakdown.steps()
    assert steps["llm_first_token"] == pytest.approx(-0.3)  # before the final transcript
    assert sum(steps.values()) == pytest.approx(0.61) == breakdown.first_audio_sent


def test_stages_not_passed_are_left_out_and_no_speech_means_no_breakdown() -> None:
    assert StageTimes(first_audio_sent=3.0).breakdown() is None  # a reply no speech prompted
    partial = StageTimes(1.0, llm_first_token=1.2, first_audio_sent=1.5).breakdown()
    assert partial is not None and partial.marks() == {
        "llm_first_token": pytest.approx(0.2),
        "first_audio_sent": pytest.approx(0.5),
    }
    assert sum(partial.steps().values()) == pytest.approx(0.5)


def test_a_report_reads_back_and_unknown_stages_are_dropped() -> None:
    back = TurnBreakdown.from_marks({"decided": 0.5, "first_audio_sent": 0.9, "made_up": 1.0})
    assert back == TurnBreakdown(decided=0.5, first_audio_sent=0.9)
