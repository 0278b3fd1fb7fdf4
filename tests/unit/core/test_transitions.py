"""The checked-transition helper the state machines share."""

from __future__ import annotations

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
