"""The gateway's view of a worker: an explicit state machine with a checked transition table."""

from __future__ import annotations

from enum import Enum

from omnivox.core.errors import IllegalTransition


class WorkerState(str, Enum):
    LOADING = "LOADING"  # registered, engine still loading
    IDLE = "IDLE"  # can be assigned
    BUSY_STREAMING = "BUSY_STREAMING"  # one streaming turn, prefill..done
    DUPLEX_ACTIVE = "DUPLEX_ACTIVE"  # a duplex or realtime session, for its whole life
    DUPLEX_PAUSED = "DUPLEX_PAUSED"  # a duplex session paused by its client
    ERROR = "ERROR"  # engine failed to load or reported a fault
    OFFLINE = "OFFLINE"  # unreachable: health checks fail, or its connection dropped mid-session

    @property
    def busy(self) -> bool:
        return self in _BUSY


_BUSY = frozenset({WorkerState.BUSY_STREAMING, WorkerState.DUPLEX_ACTIVE, WorkerState.DUPLEX_PAUSED})

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
    if new is current or new in TRANSITIONS[current]:
        return new
    raise IllegalTransition(f"worker state {current.value} -> {new.value} is not allowed")
