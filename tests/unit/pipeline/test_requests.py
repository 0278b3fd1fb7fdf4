"""The coordinator's request records: the state machine, completeness and merged results."""

from __future__ import annotations

import itertools

import pytest

from omnivox.core.errors import IllegalTransition
from omnivox.pipeline.messages import CLIENT, ArrayRef, Payload, Plan
from omnivox.pipeline.requests import TRANSITIONS, RequestState, TrackedRequest

R = RequestState
TERMINAL = {R.COMPLETED, R.FAILED, R.ABORTED}


def plan(exits: list[str], targets: dict[str, list[str]] | None = None) -> Plan:
    targets = targets or {e: [CLIENT] for e in exits}
    return Plan(
        targets=targets,
        streams={n: [] for n in targets},
        inputs={n: [] for n in targets},
        entries=[next(iter(targets))],
        exits=exits,
    )


def tracked(exits: list[str] | None = None, targets: dict[str, list[str]] | None = None) -> TrackedRequest:
    return TrackedRequest("r1", b"client-id", plan(exits or ["a"], targets), Payload(), [], 0.0)


def test_a_new_request_is_pending() -> None:
    request = tracked()
    assert request.state is R.PENDING
    assert not request.machine.done


@pytest.mark.parametrize("end", sorted(TERMINAL))
def test_pending_running_then_each_terminal_state(end: RequestState) -> None:
    request = tracked()
    request.machine.move(R.RUNNING)
    assert request.state is R.RUNNING
    request.machine.move(end)
    assert request.state is end
    assert request.machine.done


@pytest.mark.parametrize("end", [R.FAILED, R.ABORTED])
def test_a_pending_request_may_fail_or_be_aborted(end: RequestState) -> None:
    request = tracked()
    request.machine.move(end)
    assert request.state is end and request.machine.done


def test_a_pending_request_cannot_complete_without_running() -> None:
    request = tracked()
    with pytest.raises(IllegalTransition):
        request.machine.move(R.COMPLETED)
    assert request.state is R.PENDING  # the refused move changed nothing


def test_running_cannot_go_back_to_pending() -> None:
    request = tracked()
    request.machine.move(R.RUNNING)
    assert not request.machine.can(R.PENDING)
    with pytest.raises(IllegalTransition):
        request.machine.move(R.PENDING)
    assert request.state is R.RUNNING


@pytest.mark.parametrize(("end", "then"), list(itertools.product(sorted(TERMINAL), list(R))))
def test_no_move_leaves_a_terminal_state(end: RequestState, then: RequestState) -> None:
    request = tracked()
    if end is R.COMPLETED:
        request.machine.move(R.RUNNING)
    request.machine.move(end)
    if then is end:
        request.machine.move(then)  # staying put is always allowed
        assert request.state is end
        return
    assert not request.machine.can(then)
    with pytest.raises(IllegalTransition):
        request.machine.move(then)
    assert request.state is end


def test_the_table_covers_every_state_and_only_terminals_are_dead_ends() -> None:
    assert set(TRANSITIONS) == set(R)
    assert {s for s, moves in TRANSITIONS.items() if not moves} == TERMINAL
    assert R.PENDING not in set().union(*TRANSITIONS.values())  # nothing returns to pending


def test_the_illegal_transition_names_the_request_machine() -> None:
    request = tracked()
    request.machine.move(R.ABORTED)
    with pytest.raises(IllegalTransition) as info:
        request.machine.move(R.RUNNING)
    assert "pipeline request" in str(info.value.message)
    assert "aborted -> running" in str(info.value.message)


def test_states_are_plain_strings() -> None:
    assert R.PENDING == "pending" and R("aborted") is R.ABORTED
    assert {s.value for s in R} == {"pending", "running", "completed", "failed", "aborted"}


def test_stages_are_the_plan_targets() -> None:
    request = tracked(["b"], {"a": ["b"], "b": [CLIENT]})
    assert request.stages == {"a", "b"}


def test_complete_once_every_exit_has_a_result() -> None:
    request = tracked(["b", "c"], {"a": ["b", "c"], "b": [CLIENT], "c": [CLIENT]})
    assert not request.complete
    request.parts["b"] = (Payload({"x": 1}), [])
    assert not request.complete
    request.parts["a"] = (Payload(), [])  # a non-exit's result does not count
    assert not request.complete
    request.parts["c"] = (Payload({"y": 2}), [])
    assert request.complete


def test_merged_parts_follow_the_exit_order_and_renumber_frames() -> None:
    request = tracked(["b", "c"], {"a": ["b", "c"], "b": [CLIENT], "c": [CLIENT]})
    c_payload = Payload(
        {"who": "c"},
        {
            "x": ArrayRef("float32", (1,), 4, frame=0),
            "y": ArrayRef("int8", (2,), 2, frame=1),
            "shm": ArrayRef("int8", (4,), 4, segment="ovx_1_2_0123abcd"),
        },
    )
    b_payload = Payload(
        {"who": "b"},
        {"p": ArrayRef("int16", (1,), 2, frame=1), "q": ArrayRef("int16", (1,), 2, frame=0)},
    )
    # results arrive in the other order than the plan's exits
    request.parts["c"] = (c_payload, [b"c0", b"c1"])
    request.parts["b"] = (b_payload, [b"b0", b"b1"])
    parts, frames = request.merged()
    assert list(parts) == ["b", "c"]
    assert frames == [b"b0", b"b1", b"c0", b"c1"]
    assert parts["b"].arrays["p"].frame == 1 and parts["b"].arrays["q"].frame == 0
    assert parts["c"].arrays["x"].frame == 2 and parts["c"].arrays["y"].frame == 3
    assert parts["c"].arrays["shm"].frame == -1  # shared-memory arrays have no frame to move
    assert parts["c"].arrays["shm"].segment == "ovx_1_2_0123abcd"
    assert parts["b"].meta == {"who": "b"} and parts["c"].meta == {"who": "c"}
    for stage, payload in parts.items():  # each merged frame index points at that stage's bytes
        for key, ref in payload.arrays.items():
            if ref.frame >= 0:
                own_payload, own_frames = request.parts[stage]
                assert frames[ref.frame] == own_frames[own_payload.arrays[key].frame]


def test_merging_leaves_the_stored_parts_untouched() -> None:
    request = tracked(["b", "c"], {"a": ["b", "c"], "b": [CLIENT], "c": [CLIENT]})
    c_ref = ArrayRef("float32", (1,), 4, frame=0)
    request.parts["b"] = (Payload({}, {"k": ArrayRef("float32", (1,), 4, frame=0)}), [b"b"])
    request.parts["c"] = (Payload({}, {"k": c_ref}), [b"c"])
    request.merged()
    request.merged()
    assert request.parts["c"][0].arrays["k"] is c_ref and c_ref.frame == 0


def test_merged_with_no_frames() -> None:
    request = tracked(["a"])
    request.parts["a"] = (Payload({"text": "hi"}), [])
    parts, frames = request.merged()
    assert parts == {"a": Payload({"text": "hi"})} and frames == []


def test_records_are_compared_by_identity() -> None:
    one, two = tracked(), tracked()
    assert one != two and one == one
    assert len({one, two}) == 2  # hashable by identity (eq=False)
