"""The coordinator's records of its stages and clients, and the view of them it reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from omnivox.pipeline.messages import StageInfo
from omnivox.pipeline.requests import TrackedRequest
from omnivox.pipeline.spec import PipelineSpec


@dataclass
class StageRecord:
    info: StageInfo
    identity: bytes
    last_seen: float
    load: dict[str, float] = field(default_factory=dict)
    alive: bool = True
    registrations: int = 1
    lost: int = 0  # times it was written off


@dataclass
class ClientRecord:
    name: str
    host: str
    last_seen: float


class Reporting(Protocol):
    """What the view reads of the coordinator (it imports nothing of it)."""

    spec: PipelineSpec
    address: str
    epoch: str
    stages: dict[str, StageRecord]
    clients: dict[bytes, ClientRecord]
    requests: dict[str, TrackedRequest]
    counts: dict[str, int]

    def alive(self, name: str) -> bool: ...


def status_view(c: Reporting, now: float) -> dict[str, Any]:
    """The coordinator's view: its stages with their load, its clients, its requests."""
    by_state: dict[str, int] = {}
    for request in c.requests.values():
        by_state[request.state.value] = by_state.get(request.state.value, 0) + 1
    stages = []
    for spec in c.spec.stages:
        record = c.stages.get(spec.name)
        stages.append(
            {
                "name": spec.name,
                "scheduler": spec.scheduler,
                "model": spec.model,
                "placement": spec.placement,
                "alive": bool(record and record.alive),
                "address": record.info.address if record else None,
                "pid": record.info.pid if record else None,
                "last_seen_s": round(now - record.last_seen, 3) if record else None,
                "registrations": record.registrations if record else 0,
                "lost": record.lost if record else 0,
                "load": dict(record.load) if record else {},
            }
        )
    holders = [s for s in c.spec.stages if s.holds_sessions]
    return {
        "session_slots": sum(s.slots for s in holders if c.alive(s.name)) if holders else None,
        "pipeline": c.spec.name,
        "address": c.address,
        "epoch": c.epoch,
        "stages": stages,
        "clients": len(c.clients),
        "requests": by_state,
        "counts": dict(c.counts),
    }
