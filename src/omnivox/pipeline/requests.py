"""What the coordinator knows of each request: its state machine, its plan, its terminal results.

PENDING (waiting for a stage of its plan to register) -> RUNNING (submitted to its entry stages) ->
COMPLETED (every exit stage's result is in) | FAILED (a stage reported an error or was lost) |
ABORTED (its client aborted it, or went away). The three last are terminal; a record is forgotten
when it reaches one (only its id is remembered a while, so late messages about it are dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from omnivox.core.transitions import Machine
from omnivox.pipeline.messages import Payload, Plan


class RequestState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"


R = RequestState
TRANSITIONS: dict[RequestState, frozenset[RequestState]] = {
    R.PENDING: frozenset({R.RUNNING, R.FAILED, R.ABORTED}),
    R.RUNNING: frozenset({R.COMPLETED, R.FAILED, R.ABORTED}),
    R.COMPLETED: frozenset(),
    R.FAILED: frozenset(),
    R.ABORTED: frozenset(),
}


@dataclass(eq=False)
class TrackedRequest:
    request_id: str
    client: bytes  # the submitting client's socket identity
    plan: Plan
    payload: Payload  # held while PENDING (its frames too)
    frames: list[Any]
    created: float  # monotonic
    machine: Machine[RequestState] = field(init=False)
    parts: dict[str, tuple[Payload, list[Any]]] = field(default_factory=dict)  # exit -> result
    early: list[tuple[Any, list[Any]]] = field(default_factory=list)  # client stream input while PENDING
    span: Any = None  # its trace span (None: not traced), ended with it

    def __post_init__(self) -> None:
        self.machine = Machine(TRANSITIONS, RequestState.PENDING, "pipeline request")

    @property
    def state(self) -> RequestState:
        return self.machine.state

    @property
    def stages(self) -> set[str]:
        return set(self.plan.targets)

    @property
    def complete(self) -> bool:
        return all(stage in self.parts for stage in self.plan.exits)

    def merged(self) -> tuple[dict[str, Payload], list[Any]]:
        """Each exit's result, with its frame indices moved after the frames of those before it."""
        parts: dict[str, Payload] = {}
        frames: list[Any] = []
        for stage in self.plan.exits:
            payload, own = self.parts[stage]
            arrays = {
                key: ref if ref.frame < 0 else msgspec.structs.replace(ref, frame=ref.frame + len(frames))
                for key, ref in payload.arrays.items()
            }
            parts[stage] = Payload(payload.meta, arrays)
            frames.extend(own)
        return parts, frames
