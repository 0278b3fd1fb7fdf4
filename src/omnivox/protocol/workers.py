"""Worker registration and health, JSON over HTTP between workers and the gateway."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Capabilities(BaseModel):
    streaming: bool = True
    duplex: bool = False
    realtime: bool = False
    audio_in: bool = False
    audio_out: bool = False
    vision: bool = False


class WorkerHealth(BaseModel):
    """``GET /health`` on a worker."""

    status: str = "ok"
    state: str  # the worker's own state machine (LOADING, IDLE, ERROR, ...)
    engine: str
    capabilities: Capabilities
    kv_length: int = 0
    cached_hash: str | None = None
    sessions_served: int = 0
    error: str | None = None
    voices: list[str] = Field(default_factory=list)


class Registration(BaseModel):
    """``POST /api/workers/register`` (also the heartbeat: re-registering is idempotent)."""

    url: str
    worker_id: str | None = None
    health: WorkerHealth | None = None


class RegistrationReply(BaseModel):
    worker_id: str
    heartbeat_interval_s: float
