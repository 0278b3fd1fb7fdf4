"""Worker registration and health, JSON over HTTP between workers and the gateway."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from omnivox.core.errors import InvalidWorkerUrl


class WorkerState(StrEnum):
    LOADING = "LOADING"  # registered, engine still loading
    IDLE = "IDLE"  # can be assigned
    BUSY_STREAMING = "BUSY_STREAMING"  # one streaming turn, prefill..done
    DUPLEX_ACTIVE = "DUPLEX_ACTIVE"  # a duplex or realtime session, for its whole life
    DUPLEX_PAUSED = "DUPLEX_PAUSED"  # a duplex session paused by its client
    ERROR = "ERROR"  # engine failed to load or reported a fault
    OFFLINE = "OFFLINE"  # unreachable: health checks fail, or its connection dropped mid-session

    @property
    def busy(self) -> bool:
        return self in (WorkerState.BUSY_STREAMING, WorkerState.DUPLEX_ACTIVE, WorkerState.DUPLEX_PAUSED)


# task type -> (state a worker takes while serving it, capability it needs)
TASKS: dict[str, tuple[WorkerState, str]] = {
    "streaming": (WorkerState.BUSY_STREAMING, "streaming"),
    "audio_duplex": (WorkerState.DUPLEX_ACTIVE, "duplex"),
    "omni_duplex": (WorkerState.DUPLEX_ACTIVE, "duplex"),
    "realtime": (WorkerState.DUPLEX_ACTIVE, "realtime"),
}


class Capabilities(BaseModel):
    streaming: bool = True
    duplex: bool = False
    realtime: bool = False
    audio_in: bool = False
    audio_out: bool = False
    vision: bool = False

    def serves(self, task_type: str) -> bool:
        """Whether an engine with these capabilities can serve ``task_type`` sessions."""
        return bool(getattr(self, TASKS[task_type][1]))


class WorkerHealth(BaseModel):
    """``GET /health`` on a worker."""

    status: str = "ok"  # ok | degraded (it works, but see problems) | error
    state: WorkerState  # the worker's own state machine (never OFFLINE: it answered)
    engine: str
    capabilities: Capabilities
    kv_length: int = 0
    cached_hash: str | None = None
    sessions_served: int = 0
    error: str | None = None
    voices: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)  # e.g. the LLM server it uses cannot be reached
    # the highest fencing epoch of a session the worker has seen: a scheduler assigns it newer ones
    # only (it may have restarted empty, or another gateway assigned it)
    epoch: int = Field(0, ge=0)


def assignment_params(worker_id: str, ticket_id: str, epoch: int) -> dict[str, str]:
    """What a gateway's session URL tells the worker of the assignment it comes with."""
    return {"worker_id": worker_id, "ticket": ticket_id, "epoch": str(epoch)}


def assignment_epoch(query: Mapping[str, str]) -> int | None:
    """The fencing epoch a session URL carries (None: a client or an older gateway named none)."""
    raw = query.get("epoch")
    return int(raw) if raw is not None and raw.isdigit() else None


class Registration(BaseModel):
    """``POST /api/workers/register`` (also the heartbeat: re-registering is idempotent)."""

    url: str
    worker_id: str | None = None
    health: WorkerHealth | None = None


class RegistrationReply(BaseModel):
    worker_id: str
    heartbeat_interval_s: float


class SeatsRegistration(BaseModel):
    """``POST /api/workers/register/seats``: every seat of one worker process registers (and
    re-registers, as their heartbeat) in one request, each as ``Registration`` alone would."""

    seats: list[Registration] = Field(min_length=1, max_length=64)


class SeatsRegistrationReply(BaseModel):
    seats: list[RegistrationReply]  # one per seat, in the order registered


# A worker process hosting several seats (``--seats N``) serves each under its own path: each seat is
# a worker to the gateway (its own registration, health, epoch and session routes), all in one
# process. The path is the only one a worker URL may have.
SEAT_PREFIX = "/seats/"
MAX_SEATS = 64


def seat_url(base: str, seat: int) -> str:
    """The URL of seat ``seat`` of the worker process at ``base`` (``http://host:port/seats/2``)."""
    return base.rstrip("/") + SEAT_PREFIX + str(seat)


# every seat's health in one reply, so a gateway checks a process of N seats with one request a
# round, not N (a seat's own ``/health`` stays, for a single check)
SEATS_HEALTH_PATH = SEAT_PREFIX + "health"


class SeatsHealth(BaseModel):
    """``GET /seats/health`` on a worker process with seats: each seat's ``/health``, in seat order."""

    seats: list[WorkerHealth]


def seat_of(url: str) -> tuple[str, int] | None:
    """(the process's URL, the seat) of a seat's URL (``http://h:7/seats/2`` -> ``("http://h:7", 2)``);
    None for a URL that names no seat."""
    base, prefix, tail = url.rstrip("/").rpartition(SEAT_PREFIX)
    seat = seat_index(tail, MAX_SEATS) if prefix and base else None
    return (base, seat) if seat is not None else None


def seat_index(text: str, seats: int) -> int | None:
    """The seat a URL path segment names, if it names one of ``seats`` exactly (``"2"``; never
    ``"02"`` or ``"+2"``: one URL per seat, so the gateway never takes one seat for two workers)."""
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        return None
    seat = int(text)
    return seat if seat < seats else None


def worker_base_url(url: str) -> str:
    """``url`` as ``scheme://host[:port]`` if it is only that (http or https, a host, maybe a port and
    a trailing slash) or a seat of one (``.../seats/N``), else ``InvalidWorkerUrl``. The gateway
    builds every path it requests from a worker itself, so a registration can choose neither a path
    (but a seat's) nor a query (no request forgery)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises ValueError for a bad port
    except ValueError as exc:
        raise InvalidWorkerUrl(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidWorkerUrl("a worker URL is http(s)://host[:port]")
    path = "" if parts.path == "/" else parts.path
    seat = None
    if path.startswith(SEAT_PREFIX):
        seat = seat_index(path.removeprefix(SEAT_PREFIX).removesuffix("/"), MAX_SEATS)
    if parts.username or parts.password or (path and seat is None) or parts.query or parts.fragment:
        raise InvalidWorkerUrl(
            "a worker URL has no user, path (but a seat's: /seats/N), query or fragment: "
            "http(s)://host[:port][/seats/N]"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    base = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    return seat_url(base, seat) if seat is not None else base
