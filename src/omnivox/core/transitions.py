"""Checked transitions: every state machine in omnivox is an enum plus a table of allowed moves.

A move the table does not allow is a bug, never user input, so it raises ``IllegalTransition``
rather than being ignored (as starlette's WebSocketState and vLLM's RequestStatus do).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Generic, TypeVar

from omnivox.core.errors import IllegalTransition

S = TypeVar("S", bound=Enum)

Table = Mapping[S, frozenset[S]]


def check(table: Table[S], current: S, new: S, what: str = "state") -> S:
    """Return ``new`` if ``table`` allows ``current -> new`` (staying put always is), else raise."""
    if new is current or new in table.get(current, frozenset()):
        return new
    raise IllegalTransition(f"{what} {current.value} -> {new.value} is not allowed")


def terminal(table: Table[S]) -> frozenset[S]:
    """The states no move leaves."""
    return frozenset(state for state, moves in table.items() if not moves)


class Machine(Generic[S]):
    """One object's state under ``table``: ``move`` checks, ``state`` reads."""

    def __init__(self, table: Table[S], initial: S, what: str = "state") -> None:
        if initial not in table:
            raise ValueError(f"{initial!r} is not in the transition table")
        self._table = table
        self._state = initial
        self._what = what

    @property
    def state(self) -> S:
        return self._state

    def can(self, new: S) -> bool:
        return new is self._state or new in self._table[self._state]

    def move(self, new: S) -> S:
        """Take the move ``state -> new``; raises ``IllegalTransition`` if the table forbids it."""
        self._state = check(self._table, self._state, new, self._what)
        return new

    @property
    def done(self) -> bool:
        """Whether the machine is in a state no move leaves."""
        return not self._table[self._state]
