"""The interruption judge's fit: thresholds from observations, the least errors, misses weighed more."""

from __future__ import annotations

from omnivox.agent.interruption import InterruptionPolicy
from omnivox.bench.interruptions import OFF, Observation, Settled, errors, fit


def case(kind: str, text: str, no_speech: float, logprob: float, ms: float = 500.0) -> Observation:
    point = Settled(text, ms, {"no_speech_prob": no_speech, "avg_logprob": logprob})
    return Observation(kind, "hibari", text, -10.0, True, [point])


CASES = [
    case("noise", "That's it.", 0.76, -1.3),  # Whisper's hallucination on a cough
    case("noise", "I'll be right back.", 0.8, -1.6),
    case("backchannel", "I'm Kay.", 0.3, -1.4),  # a misheard "okay"
    case("barge_in", "What about tomorrow?", 0.3, -0.1),
    case("barge_in", "Hold on.", 0.35, -0.3),
    case("barge_in", "Actually, tell me about the train.", 0.2, -0.3, 1400.0),
]


def test_the_fit_separates_what_the_words_alone_cannot() -> None:
    words_only = InterruptionPolicy(evidence=False)
    assert errors(CASES, words_only, 3.0) == (3, 0)
    fitted = fit(CASES)
    assert errors(CASES, fitted, 3.0) == (0, 0)
    verdicts = [c.judged_by(fitted) for c in CASES]
    assert verdicts[:2] == ["no_speech", "no_speech"] and verdicts[2] in ("no_speech", "unclear")
    assert verdicts[3:] == ["words"] * 3
    assert fitted.unclear_over_echo_db_max == OFF  # no case needs the level rule: it stays off


def test_a_case_that_never_paused_is_unheard_and_a_silent_barge_in_is_missed() -> None:
    unheard = Observation("barge_in", "espeak", "stop", -10.0, False, [])
    silent = Observation("barge_in", "espeak", "stop", -10.0, True, [Settled("", 400.0, {})])
    assert unheard.judged_by(InterruptionPolicy()) == "unheard"
    assert silent.judged_by(InterruptionPolicy()) == "no_words"
    assert errors([unheard, silent], InterruptionPolicy(), 3.0) == (0, 2)
