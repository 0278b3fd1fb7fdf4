"""bench realtime's breakdown: a turn's stages end at the caller's voice-to-voice, their steps add up to
it, and the table takes each stage's median."""

from __future__ import annotations

import pytest

from omnivox.agent.breakdown import steps
from omnivox.bench.breakdown import COLUMNS, MARKS, median_marks, row, turn_marks


def test_a_turns_steps_add_up_to_the_voice_to_voice_the_caller_measured() -> None:
    server = {
        "noticed": 40.0,
        "decided": 520.0,
        "transcribed": 610.0,
        "llm_first_token": 380.0,  # a reply prepared in the pause: before the turn was decided
        "first_words": 560.0,
        "tts_first_audio": 640.0,
        "first_audio_sent": 650.0,
    }
    marks = turn_marks(700.0, server)
    assert list(marks) == list(MARKS)
    assert steps(marks)["to_caller"] == pytest.approx(50.0)  # the way back to the caller
    assert sum(steps(marks).values()) == pytest.approx(700.0)


def test_a_stage_the_server_did_not_report_is_left_out_and_still_adds_up() -> None:
    marks = turn_marks(480.0, {"decided": 300.0, "first_audio_sent": 450.0, "unknown": 5.0})
    assert marks == {"decided": 300.0, "first_audio_sent": 450.0, "to_caller": 480.0}
    assert sum(steps(marks).values()) == pytest.approx(480.0)


def test_the_table_row_is_each_marks_median_in_column_order() -> None:
    turns = [
        turn_marks(700.0, {"decided": 500.0, "first_audio_sent": 650.0}),
        turn_marks(900.0, {"decided": 520.0, "first_audio_sent": 880.0}),
        turn_marks(800.0, {"decided": 510.0}),
    ]
    medians = median_marks(turns)
    assert medians == {"decided": 510.0, "first_audio_sent": 765.0, "to_caller": 800.0}
    cells = row(medians)
    assert len(cells) == len(COLUMNS) and cells[MARKS.index("decided")] == 510 and cells[0] == "-"
    assert median_marks([]) == {}
