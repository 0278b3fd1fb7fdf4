"""Where one turn's voice-to-voice goes: the moments a turn and its reply pass each stage.

From the end of the user's speech to the reply's first audio sent, a turn passes, in order:

- ``noticed``: the VAD heard the pause that ended the turn begin (the chunk holding it was heard);
- ``decided``: the turn detection judged the turn over (server_vad's silence, or semantic_vad's
  end-of-turn judgement and its wait);
- ``transcribed``: the final transcript was ready (the ASR's flush);
- ``llm_first_token``: the LLM wrote its first token;
- ``first_words``: the first words were ready to be spoken (the TTS began on them);
- ``tts_first_audio``: the TTS made the first audio;
- ``first_audio_sent``: the reply's first audio went out (its voice-to-voice).

``StageTimes`` collects the clock times (the agent's monotonic clock) as they happen: the hearing's
on the event loop, the reply's on its output thread and event side; its ``marks`` are what an
adapter reports: each stage in seconds after the end of the speech. A reply prepared in the user's
pause starts before the turn is decided, so its LLM and TTS stages may come before ``decided``: the
marks are times, not a sum of durations; ``steps`` gives what each stage added over the one before
it, and the steps add up to the last mark (with ``first_audio_sent``, the voice-to-voice).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

STAGES = (
    "noticed",
    "decided",
    "transcribed",
    "llm_first_token",
    "first_words",
    "tts_first_audio",
    "first_audio_sent",
)


@dataclass
class StageTimes:
    """When a turn and its reply passed each stage (monotonic seconds; None: not passed, or not
    measured where this turn went)."""

    speech_end: float | None = None  # the user's speech ended (estimated from the audio's arrival)
    noticed: float | None = None
    decided: float | None = None
    transcribed: float | None = None
    llm_first_token: float | None = None
    first_words: float | None = None
    tts_first_audio: float | None = None
    first_audio_sent: float | None = None

    def hearing_from(self, other: StageTimes) -> None:
        """Take the hearing's stages (up to the final transcript) of the turn this reply answers."""
        self.noticed, self.decided, self.transcribed = other.noticed, other.decided, other.transcribed

    def marks(self) -> dict[str, float]:
        """The stages passed, in stage order, in seconds after the end of the speech (none when no
        speech prompted this reply): the per-turn breakdown."""
        end = self.speech_end
        if end is None:
            return {}
        return {s: t - end for s in STAGES if (t := getattr(self, s)) is not None}


def steps(marks: Mapping[str, float]) -> dict[str, float]:
    """What each mark added over the one before it, in the marks' order (the first: over the
    speech's end); they add up to the last mark."""
    out: dict[str, float] = {}
    before = 0.0
    for name, at in marks.items():
        out[name] = at - before
        before = at
    return out
