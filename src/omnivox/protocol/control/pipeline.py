"""What a pipeline coordinator reports to the gateway (``POST /api/pipeline``, with the worker key),
and what ``GET /api/stages`` shows: its stages, their load, its requests. JSON over HTTP, like worker
registration, so the gateway never imports the pipeline."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StageView(BaseModel):
    name: str
    scheduler: str
    model: str
    placement: str = "local"
    alive: bool = False
    address: str | None = None
    pid: int | None = None
    last_seen_s: float | None = None
    registrations: int = 0
    lost: int = 0  # times the coordinator wrote it off (killed, stalled, replaced)
    load: dict[str, float] = Field(default_factory=dict)  # slots_used, slots_total, queue, batches...


class PipelineReport(BaseModel):
    pipeline: str
    address: str
    epoch: str
    stages: list[StageView] = Field(default_factory=list, max_length=256)
    clients: int = 0
    requests: dict[str, int] = Field(default_factory=dict)  # in flight, by state
    counts: dict[str, int] = Field(default_factory=dict)  # since start: submitted, completed, failed...
    session_slots: int | None = None  # sessions the pipeline holds at once (its session stage's slots)

    @property
    def alive(self) -> int:
        return sum(1 for s in self.stages if s.alive)
