"""The interruption judge's fit: thresholds from observations, the least errors, misses weighed more."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from omnivox.agent.interruption import PARTIAL_WAIT_MS, InterruptionPolicy
from omnivox.bench.interruptions import (
    OFF,
    WITNESS_OFF,
    Observation,
    Settled,
    errors,
    fit,
    from_conversation,
    load,
    telephone,
)


def case(
    kind: str, text: str, no_speech: float, logprob: float, ms: float = 500.0, margin: float | None = None
) -> Observation:
    evidence = {"no_speech_prob": no_speech, "avg_logprob": logprob}
    if margin is not None:
        evidence["backchannel_margin"] = margin
    point = Settled(text, ms, evidence)
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
    assert errors(CASES, words_only) == (3, 0, 0)
    fitted = fit(CASES)
    assert errors(CASES, fitted) == (0, 0, 0)
    verdicts = [c.judged_by(fitted) for c in CASES]
    assert verdicts[:2] == ["no_speech", "no_speech"] and verdicts[2] in ("no_speech", "unclear")
    assert verdicts[3:] == ["words"] * 3
    assert fitted.unclear_over_echo_db_max == OFF  # no case needs the level rule: it stays off


def test_a_case_that_never_paused_is_unheard_and_a_silent_barge_in_is_missed() -> None:
    unheard = Observation("barge_in", "espeak", "stop", -10.0, False, [])
    silent = Observation("barge_in", "espeak", "stop", -10.0, True, [Settled("", 400.0, {})])
    assert unheard.judged_by(InterruptionPolicy()) == "unheard"
    assert silent.judged_by(InterruptionPolicy()) == "no_words"
    assert errors([unheard, silent], InterruptionPolicy()) == (0, 2, 0)


def test_a_barge_in_whose_first_word_resumes_is_cut_late() -> None:
    first = Settled("Army", 450.0, {"no_speech_prob": 0.5, "avg_logprob": -1.86})  # "sorry", misheard
    rest = Settled("Army What was that?", 1470.0, {"no_speech_prob": 0.22, "avg_logprob": -0.4})
    o = Observation("barge_in", "espeak", "sorry, what was that", -6.0, True, [first, rest])
    assert o.cut_at(InterruptionPolicy(evidence=False)) == 0
    assert o.cut_at(InterruptionPolicy()) == 1 and o.judged_by(InterruptionPolicy()) == "words"
    assert errors([o], InterruptionPolicy()) == (0, 0, 1)


def test_a_partial_only_cuts_and_only_where_the_policy_cuts_on_one(tmp_path: Path) -> None:
    # hibari's "mm hmm" over G.711 (--partials, -10 dB): Whisper's partial of its first quarter
    # second, sure of "Really?", then the pause's words at P(no speech) 0.49 / -1.74
    early = Settled("Really?", 240.0, {"no_speech_prob": 0.205, "avg_logprob": -0.661}, partial=True)
    settled = Settled("Please.", 320.0, {"no_speech_prob": 0.487, "avg_logprob": -1.738})
    mm_hmm = Observation("backchannel", "hibari", "mm hmm", -10.0, True, [early, settled])
    waiting = InterruptionPolicy()  # the default: an early partial's few words wait
    assert waiting.partial_wait_ms == PARTIAL_WAIT_MS and mm_hmm.judged_by(waiting) == "no_speech"
    every_partial = InterruptionPolicy(partial_wait_ms=0.0)  # every partial judged words cuts
    assert mm_hmm.judged_by(every_partial) == "words" and mm_hmm.cut_at(every_partial) == 0
    # espeak-ng's "what about tomorrow": a partial a second in is what cut it (its settled words
    # are unsure); a partial that is not "words" never settles a case
    nothing = Settled("", 512.0, {"no_speech_prob": 0.74, "avg_logprob": -1.18})
    late = Settled("tomorrow.", 1024.0, {"no_speech_prob": 0.385, "avg_logprob": -0.573}, partial=True)
    unsure = Settled("tomorrow", 1024.0, {"no_speech_prob": 0.463, "avg_logprob": -0.944})
    tomorrow = Observation("barge_in", "espeak", "what about tomorrow", -10.0, True, [nothing, late, unsure])
    assert tomorrow.judged_by(waiting) == "words" and tomorrow.cut_at(waiting) == 1
    only_partial = Observation("backchannel", "hibari", "yeah", -10.0, True, [replace(early, text="Yeah.")])
    assert only_partial.judged_by(waiting) == "unjudged"
    # saved and loaded with the flag (runs saved before it load as settled points)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"observations": [asdict(mm_hmm)]}))
    assert load(str(path))[0].points == [early, settled]


def test_a_lone_word_gets_its_own_threshold_between_the_cases(tmp_path: Path) -> None:
    cases = [
        case("backchannel", "door", 0.25, -0.86),  # "sure", misheard with confidence
        case("backchannel", "Yo", 0.27, -0.98),
        case("barge_in", "actually", 0.24, -0.80),  # the first word of a real barge-in
        case("barge_in", "I say that", 0.3, -0.9),  # three words as unsure: a barge-in
    ]
    fitted = fit(cases)
    assert errors(cases, fitted) == (0, 0, 0)
    assert -0.86 <= fitted.unclear_single_logprob_max < -0.80
    assert fitted.unclear_logprob_max < -0.9  # the two- and three-word rule must not take "I say that"
    # the fit can be made again from a run's saved cases
    path = tmp_path / "int.json"
    path.write_text(json.dumps({"observations": [asdict(c) for c in cases]}))
    assert load(str(path)) == cases


def test_the_no_speech_boundary_gets_a_second_step_where_the_cases_need_one() -> None:
    # as heard: the cough's words and the real barge-in's are as sure (-0.881, -0.883); only how
    # sure Whisper is that there was no speech tells them apart
    cases = [
        case("noise", "That's it.", 0.792, -0.881),  # a cough, Whisper sure of its words
        case("backchannel", "i", 0.825, -0.705),  # espeak-ng's "i see"
        case("noise", "So I'll be right back then.", 0.3, -1.4),  # the first step's (too many words
        # to be unclear)
        case("barge_in", "That's loud.", 0.638, -0.883),  # "no, that's wrong" without its "no"
        case("barge_in", "actually", 0.616, -0.489),
        case("barge_in", "What about tomorrow?", 0.3, -0.1),
    ]
    fitted = fit(cases)
    assert errors(cases, fitted) == (0, 0, 0)
    assert 0.638 < fitted.no_speech_high_min <= 0.792
    assert -0.705 <= fitted.no_speech_high_logprob_max <= -0.5
    # without the cases that need it, the step stays off
    assert fit(cases[2:]).no_speech_high_logprob_max == OFF


def test_a_conversation_run_s_judged_interjections_are_cases(tmp_path: Path) -> None:
    judged = [["backchannel", "Yeah", {"no_speech_prob": 0.2, "avg_logprob": -0.7, "voiced_ms": 288.0}]]
    cut = [["words", "i", {"no_speech_prob": 0.83, "avg_logprob": -0.71, "voiced_ms": 384.0}]]
    trace = [
        {"turn": 0, "event": "echo", "judged": judged},  # left out: an echo turn's judgements mix
        {"turn": 1, "event": "backchannel", "judged": judged},  # an old run: said by the script
        {"turn": 2, "event": "noise", "judged": []},  # nothing judged: no case
        {"turn": 3, "event": "backchannel", "judged": cut, "said": "i see"},
    ]
    run = {"args": {"gain_db": -10.0}, "conversation": {"espeak": {"trace": trace}}}
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(run))
    got = from_conversation(str(path))
    assert [(o.kind, o.said, o.voice, o.gain_db) for o in got] == [
        ("backchannel", "yeah", "espeak", -10.0),
        ("backchannel", "i see", "espeak", -10.0),
    ]
    assert got[1].points == [Settled("i", 384.0, cut[0][2])]
    assert got[1].judged_by(InterruptionPolicy(no_speech_high_logprob_max=OFF)) == "words"
    assert got[1].judged_by(InterruptionPolicy()) == "no_speech"


def test_the_witness_is_fitted_between_misheard_backchannels_and_barge_ins() -> None:
    # Whisper sure of wrong words for a backchannel over G.711, and real barge-ins as sure of theirs
    cases = [
        case("backchannel", "Bye", 0.26, -0.45, 300.0, margin=-0.2),  # "i see"
        case("backchannel", "Right there.", 0.27, -0.33, 350.0, margin=-0.1),  # "right"
        # surer of their words than the unclear rules can be: only the witness tells them apart
        case("barge_in", "actually", 0.42, -0.6, 500.0, margin=-1.9),
        case("barge_in", "That's on.", 0.49, -0.30, 700.0, margin=-0.57),  # "no, that's wrong"
        case("barge_in", "What about tomorrow?", 0.24, -0.7, 900.0, margin=-1.2),
        # garbage for a barge-in, a backchannel as likely on its sound: left to the words
        case("barge_in", "Our lead.", 0.25, -0.97, 500.0, margin=0.3),
    ]
    before = InterruptionPolicy(witness_margin_min=WITNESS_OFF)
    assert errors(cases, before)[:2] == (2, 0)
    fitted = fit(cases)
    assert errors(cases, fitted)[:2] == (0, 0)
    assert -0.57 < fitted.witness_margin_min <= -0.2
    assert -0.97 < fitted.witness_logprob_min <= -0.45  # above the garbage's, to the sure words
    assert [c.judged_by(fitted) for c in cases[:2]] == ["sounds_backchannel"] * 2
    # without cases that need it, the witness stays off
    assert fit(cases[2:]).witness_margin_min == WITNESS_OFF
    assert errors(cases, InterruptionPolicy(evidence=False))[:2] == (2, 0)


def test_a_telephone_line_band_limits_the_audio_and_keeps_its_length() -> None:
    import numpy as np

    t = np.arange(16000) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.3 * np.sin(2 * np.pi * 6000 * t)).astype(np.float32)
    line = telephone(tone)
    assert len(line) == len(tone) and line.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(line[1000:-1000]))
    freqs = np.fft.rfftfreq(len(line) - 2000, 1 / 16000)
    assert spectrum[np.argmin(np.abs(freqs - 6000))] < 0.01 * spectrum[np.argmin(np.abs(freqs - 440))]
