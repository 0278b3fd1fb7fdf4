"""Interruption edge cases: judging at the bounds, the echo check's threshold, and the calls each
phase ignores."""

from __future__ import annotations

import pytest

from omnivox.agent.interruption import (
    TRANSITIONS,
    Cut,
    Interruption,
    InterruptionPolicy,
    Pause,
    Phase,
    Resume,
    Verdict,
    is_echo,
    words,
)
from omnivox.core.config import BACKCHANNELS

SPOKEN = "the weather in paris is sunny with a light breeze all afternoon"


# ---- words and judging


def test_words_keep_apostrophes_and_digits():
    assert words("Don't stop at 10!") == ["don't", "stop", "at", "10"]
    assert words("") == []
    assert words("Ça va") == ["a", "va"]  # letters outside a-z are separators


def test_words_split_on_any_punctuation():
    assert words("yeah,okay;right") == ["yeah", "okay", "right"]
    assert words("   yeah\n\tokay  ") == ["yeah", "okay"]


def test_a_backchannel_at_exactly_the_limit_is_still_one():
    p = InterruptionPolicy(backchannel_max_ms=1000)
    assert p.judge("yeah", 1000, "") is Verdict.BACKCHANNEL
    assert p.judge("yeah", 1000.5, "") is Verdict.WORDS


def test_one_letter_fragments_are_dropped_but_a_and_digits_are_words():
    p = InterruptionPolicy()
    assert p.judge("b c d", 300, "") is Verdict.NO_WORDS
    assert p.judge("a", 300, "") is Verdict.WORDS
    assert p.judge("5", 300, "") is Verdict.WORDS
    assert p.judge("x stop", 300, "") is Verdict.WORDS


def test_fragments_around_a_backchannel_do_not_spoil_it():
    assert InterruptionPolicy().judge("W- yeah", 400, "") is Verdict.BACKCHANNEL


def test_a_backchannel_outranks_the_echo():
    p = InterruptionPolicy()
    assert p.judge("yeah okay", 500, "yeah okay so the weather") is Verdict.BACKCHANNEL


def test_a_repeated_backchannel_is_still_one():
    assert InterruptionPolicy().judge("yeah yeah yeah", 800, "") is Verdict.BACKCHANNEL


def test_a_backchannel_with_a_word_between_is_not_one():
    assert InterruptionPolicy().judge("yeah so okay", 800, "") is Verdict.WORDS


def test_backchannels_that_are_only_punctuation_are_ignored():
    p = InterruptionPolicy(backchannels=("...", "", "right"))
    assert p.judge("right", 300, "") is Verdict.BACKCHANNEL
    assert p.judge("...", 300, "") is Verdict.NO_WORDS
    assert p.judge("okay", 300, "") is Verdict.WORDS


def test_no_backchannels_at_all():
    p = InterruptionPolicy(backchannels=())
    assert p.judge("yeah", 300, "") is Verdict.WORDS


def test_backchannels_are_matched_as_words_whatever_their_case_or_hyphens():
    p = InterruptionPolicy(backchannels=("Uh-Huh",))
    assert p.judge("uh huh", 300, "") is Verdict.BACKCHANNEL
    assert p.judge("UH-HUH!", 300, "") is Verdict.BACKCHANNEL


def test_the_default_backchannels_are_the_configs():
    assert InterruptionPolicy().backchannels == BACKCHANNELS


def test_echo_words_off_makes_the_assistants_words_a_barge_in():
    p = InterruptionPolicy(echo_words=False)
    assert p.judge("sunny with a light breeze", 900, SPOKEN) is Verdict.WORDS


def test_an_echo_needs_something_spoken():
    assert InterruptionPolicy().judge("sunny with a light breeze", 900, "") is Verdict.WORDS


# ---- is_echo


def test_is_echo_needs_two_words_and_something_spoken():
    assert not is_echo([], ["a", "b"])
    assert not is_echo(["sunny"], words(SPOKEN))
    assert not is_echo(["sunny", "with"], [])


def test_is_echo_at_exactly_eighty_percent():
    spoken = ["a", "b", "c", "d", "e"]
    assert is_echo(["a", "b", "c", "d", "x"], spoken)  # 4 of 5
    assert not is_echo(["a", "b", "c", "x", "y"], spoken)  # 3 of 5


def test_is_echo_allows_gaps_in_what_was_said():
    assert is_echo(["weather", "paris", "sunny", "breeze"], words(SPOKEN))


def test_is_echo_counts_repeats_once_each():
    assert not is_echo(["sunny", "sunny", "sunny"], ["sunny"])
    assert is_echo(["sunny", "sunny"], ["sunny", "day", "sunny"])


# ---- the state machine


def turn(**kw) -> Interruption:
    t = Interruption(InterruptionPolicy(**kw))
    t.speech_started(0)
    return t


def test_a_fresh_turn():
    t = Interruption()
    assert t.phase is Phase.NONE
    assert t.started_ms == 0.0 and t.paused_ms is None and t.verdict is None and t.heard_text == ""


def test_the_table_lets_each_phase_return_to_none():
    for phase in (Phase.PAUSED, Phase.RESUMED, Phase.BARGED_IN):
        assert Phase.NONE in TRANSITIONS[phase]
    assert TRANSITIONS[Phase.BARGED_IN] == frozenset({Phase.NONE})


def test_confirmed_pauses_and_records_when():
    t = turn()
    assert t.confirmed(240, True) == Pause()
    assert t.phase is Phase.PAUSED and t.paused_ms == 240


def test_confirmed_twice_pauses_once():
    t = turn()
    t.confirmed(100, True)
    assert t.confirmed(300, True) is None
    assert t.paused_ms == 100


def test_a_negative_resume_is_no_recovery_too():
    t = turn(resume_ms=-5)
    assert t.confirmed(100, True) == Cut()
    assert t.phase is Phase.BARGED_IN and t.paused_ms is None


def test_heard_outside_a_pause_is_ignored():
    t = turn()
    assert t.heard("stop", 300, SPOKEN, settled=True) is None
    assert t.heard_text == "" and t.phase is Phase.NONE


def test_a_partial_without_words_waits():
    t = turn()
    t.confirmed(100, True)
    assert t.heard("mhm", 300, SPOKEN, settled=False) is None
    assert t.phase is Phase.PAUSED and t.heard_text == "mhm" and t.verdict is None


def test_a_settled_echo_resumes_with_its_reason():
    t = turn()
    t.confirmed(100, True)
    assert t.heard("sunny with a light breeze", 900, SPOKEN, settled=True) == Resume(Verdict.ECHO)
    assert t.phase is Phase.RESUMED and t.verdict is Verdict.ECHO


def test_the_speech_length_is_measured_from_the_speech_start():
    t = Interruption(InterruptionPolicy(backchannel_max_ms=1000))
    t.speech_started(10_000)
    t.confirmed(10_100, True)
    assert t.heard("yeah", 10_900, "", settled=True) == Resume(Verdict.BACKCHANNEL)
    t.turn_ended()
    t.speech_started(20_000)
    t.confirmed(20_100, True)
    assert t.heard("yeah", 21_500, "", settled=True) == Cut()


def test_after_a_cut_nothing_more_happens_until_the_turn_ends():
    t = turn()
    t.confirmed(100, True)
    assert t.heard("stop", 300, SPOKEN, settled=False) == Cut()
    assert t.heard("yeah", 400, SPOKEN, settled=True) is None
    assert t.confirmed(500, True) is None
    assert t.speaks_on(600, True) is None
    assert t.expired("", 2000, SPOKEN) is None
    assert not t.due(10_000)
    assert t.turn_ended() is Verdict.WORDS
    assert t.phase is Phase.NONE


def test_speaks_on_only_after_a_resume_and_over_the_assistant():
    t = turn()
    assert t.speaks_on(100, True) is None  # not resumed
    t.confirmed(100, True)
    assert t.speaks_on(200, True) is None  # paused, not resumed
    t.heard("", 500, SPOKEN, settled=True)
    assert t.phase is Phase.RESUMED
    assert t.speaks_on(800, False) is None  # the assistant has stopped
    assert t.speaks_on(900, True) == Pause()
    assert t.phase is Phase.PAUSED and t.paused_ms == 900


def test_a_resumed_reply_can_still_be_cut_on_the_next_words():
    t = turn()
    t.confirmed(100, True)
    t.heard("yeah", 400, SPOKEN, settled=True)
    t.speaks_on(900, True)
    assert t.heard("yeah but tell me about tomorrow", 1400, SPOKEN, settled=False) == Cut()
    assert t.heard_text == "yeah but tell me about tomorrow"
    assert t.turn_ended() is Verdict.WORDS


def test_due_is_measured_from_the_latest_pause():
    t = turn(resume_ms=1000)
    t.confirmed(100, True)
    assert not t.due(1099) and t.due(1100)
    t.heard("", 500, SPOKEN, settled=True)
    assert not t.due(5000)  # resumed: nothing is due
    t.speaks_on(3000, True)
    assert not t.due(3999) and t.due(4000)


def test_expired_with_a_backchannel_resumes():
    t = turn()
    t.confirmed(100, True)
    assert t.expired("okay", 1200, SPOKEN) == Resume(Verdict.BACKCHANNEL)
    assert t.heard_text == "okay"


def test_expired_outside_a_pause_is_ignored():
    t = turn()
    assert t.expired("stop", 2000, SPOKEN) is None
    assert t.phase is Phase.NONE


def test_turn_ended_without_an_overlap_is_none():
    t = turn()
    assert t.turn_ended() is None
    assert t.phase is Phase.NONE


def test_turn_ended_resets_the_pause_and_verdict_but_not_the_text():
    t = turn()
    t.confirmed(100, True)
    t.heard("mhm", 400, SPOKEN, settled=True)
    assert t.turn_ended() is Verdict.BACKCHANNEL
    assert t.paused_ms is None and t.verdict is None
    assert t.turn_ended() is None
    assert t.heard_text == "mhm"


def test_a_turn_ended_while_paused_reports_no_verdict():
    t = turn()
    t.confirmed(100, True)
    assert t.turn_ended() is None
    assert t.phase is Phase.NONE


@pytest.mark.parametrize("decision", [Pause(), Resume(Verdict.NO_WORDS), Cut()])
def test_decisions_are_frozen_values(decision):
    assert decision == type(decision)(*([decision.reason] if isinstance(decision, Resume) else []))
    with pytest.raises(AttributeError):
        decision.x = 1  # type: ignore[union-attr]
