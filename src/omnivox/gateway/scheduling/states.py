"""The gateway's view of a worker: an explicit state machine with a checked transition table."""

from __future__ import annotations

from omnivox.core import transitions
from omnivox.protocol.control.workers import WorkerState

__all__ = ["TRANSITIONS", "WorkerState", "check_transition"]


S = WorkerState
TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    S.LOADING: frozenset({S.IDLE, S.ERROR, S.OFFLINE}),
    S.IDLE: frozenset({S.BUSY_STREAMING, S.DUPLEX_ACTIVE, S.LOADING, S.ERROR, S.OFFLINE}),
    S.BUSY_STREAMING: frozenset({S.IDLE, S.ERROR, S.OFFLINE}),
    S.DUPLEX_ACTIVE: frozenset({S.DUPLEX_PAUSED, S.IDLE, S.ERROR, S.OFFLINE}),
    S.DUPLEX_PAUSED: frozenset({S.DUPLEX_ACTIVE, S.IDLE, S.ERROR, S.OFFLINE}),
    S.ERROR: frozenset({S.LOADING, S.IDLE, S.OFFLINE}),
    S.OFFLINE: frozenset({S.LOADING, S.IDLE, S.ERROR}),
}


def check_transition(current: WorkerState, new: WorkerState) -> WorkerState:
    """Return ``new`` if the move is allowed (staying put always is), else raise IllegalTransition."""
    return transitions.check(TRANSITIONS, current, new, "worker state")
