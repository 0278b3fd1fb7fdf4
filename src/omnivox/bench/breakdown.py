"""``bench realtime``'s per-turn breakdown: where each turn's voice-to-voice went, stage by stage.

Each reply a caller hears ends with the server's ``omnivox.turn.breakdown`` event (``?omnivox_events=
true``): when the turn passed each stage (``agent.breakdown.STAGES``), in ms after the end of the
user's speech as the server estimated it. The caller pairs it with the voice-to-voice it measured
itself; what is left over, ``to caller``, is the way from the server's first audio sent to the
caller's first audio received plus the difference between the caller's and the server's idea of when
the speech ended. So a turn's stages, as marks, end at its voice-to-voice exactly (``turn_marks``),
and the table's columns are each mark's median over the turns (``median_marks``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from omnivox.agent.breakdown import STAGES

TO_CALLER = "to_caller"
MARKS = (*STAGES, TO_CALLER)  # the last: the caller's voice-to-voice
LABELS = {
    "noticed": "noticed ms",
    "decided": "decided ms",
    "transcribed": "final ms",
    "llm_first_token": "LLM 1st token ms",
    "first_words": "first words ms",
    "tts_first_audio": "TTS 1st audio ms",
    "first_audio_sent": "sent ms",
    TO_CALLER: "v2v ms",
}


def turn_marks(v2v_ms: float, stages_ms: dict[str, float]) -> dict[str, float]:
    """One turn's marks (ms after the end of speech): the server's stages it reported, then the
    caller's voice-to-voice (``to_caller``). The steps between successive marks add up to it."""
    marks = {s: float(stages_ms[s]) for s in STAGES if s in stages_ms}
    marks[TO_CALLER] = v2v_ms
    return marks


def median_marks(turns: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each mark's median over the turns that reported it."""
    return {
        name: statistics.median(values) for name in MARKS if (values := [t[name] for t in turns if name in t])
    }


def row(marks: dict[str, float]) -> list[object]:
    """A table row: the marks in column order, "-" where a stage was not reported."""
    return [round(marks[m]) if m in marks else "-" for m in MARKS]


COLUMNS = [LABELS[m] for m in MARKS]
