"""The semantic_vad policy: pure decisions from a pause length and an end-of-turn probability."""

from __future__ import annotations

import pytest

from omnivox.voice.turn.policy import EAGERNESS, SemanticTurnPolicy, TurnDecision


@pytest.mark.parametrize(("eagerness", "longest"), [("low", 8000), ("medium", 4000), ("high", 2000)])
def test_the_longest_waits_are_openais(eagerness, longest):
    policy = SemanticTurnPolicy.for_eagerness(eagerness)
    assert policy.max_ms == longest
    assert not policy.is_turn_over(longest - 1, 0.0)
    assert policy.is_turn_over(longest, 0.0)
    assert policy.is_turn_over(longest, None)


def test_auto_is_medium():
    assert SemanticTurnPolicy.for_eagerness("auto") == SemanticTurnPolicy.for_eagerness("medium")
    assert SemanticTurnPolicy.for_eagerness() == EAGERNESS["medium"]


def test_an_unknown_eagerness_is_refused():
    with pytest.raises(ValueError, match="eagerness"):
        SemanticTurnPolicy.for_eagerness("eager")


@pytest.mark.parametrize(
    ("eagerness", "sure_ms", "finished_ms"), [("low", 500, 1200), ("medium", 250, 640), ("high", 200, 320)]
)
def test_pause_needed_by_how_sure_the_model_is(eagerness, sure_ms, finished_ms):
    policy = SemanticTurnPolicy.for_eagerness(eagerness)
    assert policy.required_pause_ms(0.95) == sure_ms
    assert policy.required_pause_ms(0.6) == finished_ms
    assert policy.required_pause_ms(0.2) == policy.max_ms
    assert policy.required_pause_ms(None) == policy.max_ms


def test_more_eager_never_waits_longer():
    low, medium, high = (SemanticTurnPolicy.for_eagerness(e) for e in ("low", "medium", "high"))
    for p in (None, 0.0, 0.3, 0.5, 0.7, 0.9, 1.0):
        assert low.required_pause_ms(p) >= medium.required_pause_ms(p) >= high.required_pause_ms(p)


def test_a_more_finished_probability_never_waits_longer():
    policy = SemanticTurnPolicy.for_eagerness("medium")
    waits = [policy.required_pause_ms(p / 100) for p in range(101)]
    assert waits == sorted(waits, reverse=True)


def test_decisions_say_why_and_how_long_to_wait():
    policy = SemanticTurnPolicy.for_eagerness("medium")
    assert policy.decide(100, 0.95) == TurnDecision(False, 250, 150, "waiting")
    assert policy.decide(250, 0.95) == TurnDecision(True, 250, 0.0, "sure")
    assert policy.decide(640, 0.6) == TurnDecision(True, 640, 0.0, "finished")
    assert policy.decide(1000, 0.2) == TurnDecision(False, 4000, 3000, "waiting")
    assert policy.decide(4000, 0.2) == TurnDecision(True, 4000, 0.0, "max_pause")
    assert policy.decide(5000, None).reason == "max_pause"


def test_the_latest_probability_decides():
    """A pause that looked unfinished ends as soon as a newer judgement says finished."""
    policy = SemanticTurnPolicy.for_eagerness("high")
    assert not policy.is_turn_over(400, 0.1)
    assert policy.is_turn_over(400, 0.7)


def test_thresholds_are_inclusive():
    policy = SemanticTurnPolicy(sure_ms=100, finished_ms=300, max_ms=1000, threshold=0.5, sure=0.9)
    assert policy.required_pause_ms(0.5) == 300
    assert policy.required_pause_ms(0.9) == 100
    assert policy.required_pause_ms(0.4999) == 1000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sure_ms": 500, "finished_ms": 300, "max_ms": 1000},
        {"sure_ms": 100, "finished_ms": 3000, "max_ms": 1000},
        {"sure_ms": -1, "finished_ms": 300, "max_ms": 1000},
        {"sure_ms": 100, "finished_ms": 300, "max_ms": 1000, "threshold": 0.95, "sure": 0.9},
        {"sure_ms": 100, "finished_ms": 300, "max_ms": 1000, "threshold": 0.0},
    ],
)
def test_inconsistent_policies_are_refused(kwargs):
    with pytest.raises(ValueError):
        SemanticTurnPolicy(**kwargs)


@pytest.mark.parametrize("eagerness", ["low", "medium", "high"])
def test_finished_words_ask_for_the_finished_pause_when_the_model_hears_no_end(eagerness):
    # a flat voice's complete sentence: smart-turn 0.02, the words end on a content word
    policy = SemanticTurnPolicy.for_eagerness(eagerness)
    assert policy.tier(0.02, words_complete=True) == "finished"
    assert policy.required_pause_ms(0.02, True) == policy.finished_ms
    assert policy.required_pause_ms(None, True) == policy.finished_ms
    # the model alone still decides "sure"
    assert policy.tier(0.95, True) == "sure" and policy.tier(0.6, True) == "finished"


@pytest.mark.parametrize("probability", [None, 0.1, 0.6, 0.99])
def test_unfinished_words_ask_for_the_longest_pause_whatever_the_model(probability):
    # "Can you remind me to?" said with a falling cadence: smart-turn 0.98
    policy = SemanticTurnPolicy.for_eagerness("medium")
    decision = policy.decide(policy.finished_ms, probability, words_complete=False)
    assert not decision.finished and decision.required_ms == policy.max_ms
    assert policy.decide(policy.max_ms, probability, False) == TurnDecision(
        True, policy.max_ms, 0.0, "max_pause"
    )


@pytest.mark.parametrize("probability", [None, 0.1, 0.6, 0.99])
def test_words_that_cannot_tell_leave_the_model_alone(probability):
    policy = SemanticTurnPolicy.for_eagerness("high")
    assert policy.required_pause_ms(probability, None) == policy.required_pause_ms(probability)
