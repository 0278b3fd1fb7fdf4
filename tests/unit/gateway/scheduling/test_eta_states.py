"""Queue wait estimates (baselines, the moving average, the plan over workers) and the worker state
table."""

from __future__ import annotations

import pytest

from omnivox.core.errors import IllegalTransition
from omnivox.gateway.scheduling.eta import (
    BASELINE_S,
    DEFAULT_BASELINE_S,
    DurationModel,
    WaitPlan,
    estimate_waits,
)
from omnivox.gateway.scheduling.states import TRANSITIONS, WorkerState, check_transition
from omnivox.protocol.control.workers import TASKS

S = WorkerState


# ---- durations


def test_every_task_type_has_a_baseline():
    assert set(BASELINE_S) == set(TASKS)
    model = DurationModel()
    for task, seconds in BASELINE_S.items():
        assert model.expected(task) == seconds


def test_an_unknown_task_type_gets_the_default_baseline():
    assert DurationModel().expected("something-else") == DEFAULT_BASELINE_S


def test_samples_are_counted_per_task_type():
    model = DurationModel(min_samples=2)
    model.observe("streaming", 5.0)
    model.observe("realtime", 50.0)
    model.observe("streaming", 7.0)
    assert (
        model.samples("streaming") == 2
        and model.samples("realtime") == 1
        and model.samples("omni_duplex") == 0
    )
    assert model.expected("streaming") == pytest.approx(0.3 * 7 + 0.7 * 5)
    assert model.expected("realtime") == BASELINE_S["realtime"]  # one sample is not enough


def test_the_first_sample_seeds_the_average():
    model = DurationModel(alpha=0.5, min_samples=1)
    model.observe("streaming", 8.0)
    assert model.expected("streaming") == 8.0
    model.observe("streaming", 4.0)
    assert model.expected("streaming") == 6.0


def test_alpha_one_follows_the_last_sample():
    model = DurationModel(alpha=1.0, min_samples=1)
    for s in (3.0, 9.0, 1.5):
        model.observe("audio_duplex", s)
    assert model.expected("audio_duplex") == 1.5


def test_models_do_not_share_their_averages():
    a, b = DurationModel(min_samples=1), DurationModel(min_samples=1)
    a.observe("streaming", 1.0)
    assert b.samples("streaming") == 0 and b.expected("streaming") == BASELINE_S["streaming"]


# ---- the plan


def test_no_tickets_no_waits():
    assert estimate_waits([0.0, 3.0], [], DurationModel()) == []


def test_idle_workers_take_tickets_at_once():
    assert estimate_waits([0.0, 0.0, 0.0], ["streaming"] * 3, DurationModel()) == [0.0, 0.0, 0.0]


def test_overdue_workers_count_as_free_now():
    # a busy worker past its expected duration has a negative remaining time: it is due any moment
    assert estimate_waits([-30.0], ["streaming", "streaming"], DurationModel()) == [0.0, 20.0]


def test_without_workers_the_baselines_add_up_in_order():
    waits = estimate_waits([], ["streaming", "realtime", "streaming"], DurationModel())
    assert waits == [0.0, 20.0, 140.0]


def test_a_plan_grows_one_ticket_at_a_time_like_a_whole_estimate():
    model = DurationModel()
    tasks = ["streaming", "audio_duplex", "streaming", "omni_duplex", "realtime", "streaming"]
    plan = WaitPlan([4.0, 0.0, 11.0], model)
    assert [plan.add(t) for t in tasks] == estimate_waits([4.0, 0.0, 11.0], tasks, model)


def test_the_plan_uses_measured_durations_once_there_are_enough():
    model = DurationModel(alpha=1.0, min_samples=1)
    model.observe("streaming", 2.0)
    assert estimate_waits([0.0], ["streaming"] * 4, model) == [0.0, 2.0, 4.0, 6.0]


def test_the_plan_does_not_change_its_input():
    remaining = [5.0, 1.0]
    estimate_waits(remaining, ["streaming"] * 3, DurationModel())
    assert remaining == [5.0, 1.0]


# ---- states


def test_busy_states():
    assert {s for s in S if s.busy} == {S.BUSY_STREAMING, S.DUPLEX_ACTIVE, S.DUPLEX_PAUSED}


def test_the_table_covers_every_state_and_staying_put_is_always_allowed():
    assert set(TRANSITIONS) == set(S)
    for state in S:
        assert check_transition(state, state) is state


@pytest.mark.parametrize("state", list(S))
def test_a_worker_can_always_be_lost_or_fail(state):
    for bad in (S.OFFLINE, S.ERROR):
        if bad is not state:
            assert check_transition(state, bad) is bad


def test_only_an_idle_worker_is_assigned():
    for state in S:
        for busy in (S.BUSY_STREAMING, S.DUPLEX_ACTIVE):
            allowed = busy in TRANSITIONS[state] or busy is state
            expected = state is S.IDLE or state is busy or (state, busy) == (S.DUPLEX_PAUSED, S.DUPLEX_ACTIVE)
            assert allowed == expected, (state, busy)


def test_pausing_is_only_for_duplex_sessions():
    assert check_transition(S.DUPLEX_ACTIVE, S.DUPLEX_PAUSED) is S.DUPLEX_PAUSED
    assert check_transition(S.DUPLEX_PAUSED, S.DUPLEX_ACTIVE) is S.DUPLEX_ACTIVE
    for state in (S.IDLE, S.BUSY_STREAMING, S.LOADING):
        with pytest.raises(IllegalTransition, match="worker state"):
            check_transition(state, S.DUPLEX_PAUSED)


def test_every_state_can_return_to_idle():
    assert all(S.IDLE in TRANSITIONS[s] for s in S if s is not S.IDLE)


def test_the_error_names_both_states():
    with pytest.raises(IllegalTransition) as caught:
        check_transition(S.OFFLINE, S.BUSY_STREAMING)
    assert "OFFLINE" in caught.value.message and "BUSY_STREAMING" in caught.value.message
