"""The checked-transition helper the state machines share."""

from __future__ import annotations

import importlib
from enum import StrEnum

import pytest

from omnivox.core.errors import IllegalTransition
from omnivox.core.transitions import Machine, check, terminal


class Light(StrEnum):
    OFF = "off"
    ON = "on"
    BROKEN = "broken"


TABLE = {
    Light.OFF: frozenset({Light.ON, Light.BROKEN}),
    Light.ON: frozenset({Light.OFF, Light.BROKEN}),
    Light.BROKEN: frozenset(),
}


def test_check_allows_the_table_and_staying_put() -> None:
    assert check(TABLE, Light.OFF, Light.ON) is Light.ON
    assert check(TABLE, Light.BROKEN, Light.BROKEN) is Light.BROKEN  # staying put always is
    with pytest.raises(IllegalTransition) as err:
        check(TABLE, Light.BROKEN, Light.ON, "light")
    assert err.value.code == "illegal_transition"
    assert "light broken -> on" in err.value.message


def test_terminal_states_are_those_no_move_leaves() -> None:
    assert terminal(TABLE) == {Light.BROKEN}


def test_machine_moves_checks_and_knows_when_it_is_done() -> None:
    m = Machine(TABLE, Light.OFF, "light")
    assert m.state is Light.OFF and m.can(Light.ON) and not m.done
    assert m.move(Light.ON) is Light.ON and m.state is Light.ON
    m.move(Light.BROKEN)
    assert m.done and not m.can(Light.OFF) and m.can(Light.BROKEN)
    with pytest.raises(IllegalTransition):
        m.move(Light.OFF)
    assert m.state is Light.BROKEN  # a refused move changes nothing


def test_a_machine_must_start_in_a_known_state() -> None:
    with pytest.raises(ValueError):
        Machine({Light.OFF: frozenset()}, Light.ON)


# every state machine omnivox runs on this helper (module, table)
TABLES = [
    ("omnivox.gateway.scheduling.states", "TRANSITIONS"),
    ("omnivox.gateway.telephony.call", "TRANSITIONS"),
    ("omnivox.gateway.edges.calls", "TRANSITIONS"),
    ("omnivox.agent.interruption", "TRANSITIONS"),
    ("omnivox.agent.reply", "TRANSITIONS"),
    ("omnivox.pipeline.requests", "TRANSITIONS"),
    ("omnivox.worker.duplex.session", "PHASES"),
    ("omnivox.worker.host", "TRANSITIONS"),
]


@pytest.mark.parametrize(("module", "name"), TABLES, ids=[m for m, _ in TABLES])
def test_every_machines_moves_lead_to_states_its_table_knows(module: str, name: str) -> None:
    # a move into a state without a row would leave Machine.can/done raising KeyError there
    table = getattr(importlib.import_module(module), name)
    kind = type(next(iter(table)))
    assert all(isinstance(state, kind) for state in table)
    for state, moves in table.items():
        assert isinstance(moves, frozenset) and moves <= table.keys(), (state, moves - table.keys())
        assert state not in moves  # staying put is always allowed: a row never needs to say so
    for end in terminal(table):  # a state no move leaves is one some move enters (else it is dead)
        assert any(end in moves for moves in table.values()), end


def test_a_table_without_a_row_for_the_current_state_refuses_every_move() -> None:
    with pytest.raises(IllegalTransition):
        check({Light.OFF: frozenset({Light.ON})}, Light.ON, Light.OFF)
