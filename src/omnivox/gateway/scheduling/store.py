"""The scheduler store: the one interface between the gateway and its scheduling state.

The queue, the worker registry, assignments, ETA figures and the pipeline's slot report live behind
``SchedulerStore``. Two stores implement it:

- ``MemoryStore`` (``memory_store``): today's ``WorkerPool`` in this process, the default. One gateway.
- ``RedisStore`` (``gateway.cluster.scheduler``): the same semantics as scripts on a Redis server, so
  several gateways share one queue and one worker registry.

Both keep the seed's invariants: one dispatch point, a worker marked busy in the same step it is
assigned (never assigned twice), FIFO per task type, the oldest servable ticket first across types.
Each assignment carries a fencing ``epoch`` (a per-worker counter bumped by every assignment): the
worker refuses a session whose epoch is older than one it has seen.

Everything is async: the memory store's methods never await, so there, as before, no two coroutines
see a worker half-assigned; in the Redis store that comes from each operation being one script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState

KEEP: Any = object()  # release(): leave the worker's cached hash as it is


@dataclass(frozen=True)
class Assignment:
    """A worker given to a ticket: what the gateway needs to open the session, and to end it."""

    ticket_id: str
    worker_id: str
    url: str  # the worker's http(s) base URL
    engine: str
    task_type: str
    epoch: int  # the fencing token: the worker refuses a session older than one it has seen
    cache_hit: bool = False  # the worker's cache holds the history this ticket continues


@dataclass(eq=False)
class Ticket:
    """A place in the queue. ``future`` resolves to the ``Assignment`` (or ``TicketCancelled``)."""

    ticket_id: str
    task_type: str
    history_hash: str | None
    future: asyncio.Future[Assignment]
    enqueued_at: float  # the store's clock
    worker_id: str | None = None
    cache_hit: bool = False
    seq: int = 0  # its place in the line (kept while it steps out of it: ``orphan``)


@dataclass(frozen=True)
class WorkerView:
    """A worker as the store sees it, at one moment."""

    worker_id: str
    url: str
    state: WorkerState
    engine: str = ""
    capabilities: Capabilities = field(default_factory=Capabilities)
    cached_hash: str | None = None
    cache_age_s: float | None = None
    ticket_id: str | None = None
    task_type: str | None = None
    busy_for_s: float | None = None
    sessions_served: int = 0
    kv_length: int = 0
    voices: tuple[str, ...] = ()
    error: str | None = None
    problems: tuple[str, ...] = ()  # what it says is wrong (e.g. its LLM server)
    epoch: int = 0
    monitor: str | None = None  # the gateway that health-checks it (None: this one, or unknown)

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/workers`` shows of it."""
        return {
            "worker_id": self.worker_id,
            "url": self.url,
            "state": self.state.value,
            "engine": self.engine,
            "capabilities": self.capabilities.model_dump(),
            "cached_hash": self.cached_hash,
            "cache_age_s": self.cache_age_s,
            "ticket_id": self.ticket_id,
            "task_type": self.task_type,
            "busy_for_s": self.busy_for_s,
            "sessions_served": self.sessions_served,
            "kv_length": self.kv_length,
            "error": self.error,
            "problems": list(self.problems),
            "epoch": self.epoch,
            "monitor": self.monitor,
        }


@dataclass(frozen=True)
class TicketView:
    """A ticket as ``/api/queue`` shows it."""

    ticket_id: str
    task_type: str
    position: int  # 1-based while queued; 0 once assigned
    estimated_wait_s: float
    waited_s: float
    worker_id: str | None = None
    gateway: str | None = None  # the gateway holding its client

    def to_json(self) -> dict[str, Any]:
        return {
            "ticket_id": self.ticket_id,
            "task_type": self.task_type,
            "status": "queued" if self.position else "assigned",
            "position": self.position,
            "estimated_wait_s": self.estimated_wait_s,
            "waited_s": self.waited_s,
            "worker_id": self.worker_id,
            "gateway": self.gateway,
        }


@dataclass(frozen=True)
class Positions:
    """Where some tickets stand: ``places`` maps a queued ticket to (1-based position, wait in s)."""

    queue_length: int
    places: dict[str, tuple[int, float]]


@dataclass(frozen=True)
class PipelineState:
    """The pipeline coordinator's last report, how long ago it came, and the slots in use."""

    report: PipelineReport
    age_s: float
    slots_used: int


class SchedulerStore(Protocol):
    """The gateway's scheduling state. Mutations dispatch: a freed worker or a new ticket may
    assign the oldest servable ticket in the same step."""

    kind: str  # "memory" | "redis"
    gateway_id: str

    @property
    def max_queue_size(self) -> int: ...

    @property
    def clock(self) -> Callable[[], float]:
        """Monotonic seconds, for what this gateway measures itself."""
        ...

    async def start(self) -> None:
        """Begin background work (leases, the assignment inbox); a no-op for the memory store."""

    async def close(self) -> None:
        """Give back what this gateway holds and stop background work."""

    # ---- tickets

    async def enqueue(self, task_type: str, history_hash: str | None = None) -> Ticket:
        """Queue a ticket and dispatch. Raises QueueFull, WorkerUnavailable (no worker can ever
        serve it) or StoreUnavailable."""
        ...

    async def cancel(self, ticket_id: str) -> bool:
        """Cancel a queued ticket (any gateway's): its waiter gets TicketCancelled. False if it is
        not queued."""
        ...

    async def withdraw(self, ticket: Ticket) -> None:
        """This gateway's waiter is going: its ticket leaves the queue, or, if a worker was assigned
        to it meanwhile, the worker is given back. Never raises for store trouble."""
        ...

    async def orphan(self, ticket: Ticket, grace_s: float) -> None:
        """This gateway's waiter is going, but its client may come back with its resume token: a
        queued ticket steps out of the line for ``grace_s`` seconds and keeps its place (nobody is
        held up by it meanwhile); one assigned meanwhile gives its worker back, as ``withdraw``.
        Never raises for store trouble."""
        ...

    async def reattach(self, ticket_id: str, task_type: str) -> Ticket | None:
        """The place of a client that came back, for this gateway's new waiter: an orphaned ticket
        (any gateway's, within its grace) goes back into the line at its old place; one still
        queued (the old connection not yet seen gone, or its gateway dead and not yet reaped) keeps
        its place, and its old waiter hears it was cancelled. It may be assigned in the same step.
        None if there is no such ticket (served, expired, never was) or it waits for another kind
        of session. Raises StoreUnavailable."""
        ...

    async def requeue(self, ticket: Ticket, refused: Assignment, *, lost: bool = False) -> Ticket | None:
        """The worker of ``refused`` (this gateway's assignment of ``ticket``) did not take the
        session: it refused it at the handshake (the assignment was stale, or it could not take one
        now), or (``lost``) could not be reached. The ticket goes back into the line at its old
        place, ahead of everyone who queued after it, for the next worker; it may be assigned in
        the same step. A worker still on this assignment is handed out again only once its own
        health says it is free; a lost one goes OFFLINE (as ``worker_lost``). A new ``Ticket`` (same
        id, a new future); None if the ticket is no longer this gateway's to put back (queued or
        orphaned already, or another assignment's): a client never holds two places. Raises
        StoreUnavailable."""
        ...

    async def release(
        self, assignment: Assignment, *, cached_hash: str | None = KEEP, confirmed: bool = True
    ) -> None:
        """End ``assignment`` (never a later one of the same worker). ``cached_hash``: what the
        worker's cache now holds. Unconfirmed: the worker stays busy until its own health says it
        is free. Never raises for store trouble (it is retried)."""
        ...

    async def worker_lost(self, assignment: Assignment) -> None:
        """The worker serving ``assignment`` vanished: it goes OFFLINE (unless it was assigned anew
        since)."""
        ...

    async def set_paused(self, assignment: Assignment, paused: bool) -> None:
        """A duplex session paused or resumed (a pause frees nothing: the worker keeps it)."""
        ...

    def note_paused(self, assignment: Assignment, paused: bool) -> None:
        """``set_paused`` from a callback that cannot await: the store follows soon."""
        ...

    # ---- workers

    async def register(self, url: str, wished_id: str | None = None) -> tuple[str, bool]:
        """Add a worker (LOADING until its health says otherwise); a known URL returns its id.
        (worker id, whether it is new). Raises TooManyWorkers."""
        ...

    async def report_health(self, worker_id: str, health: WorkerHealth) -> WorkerView | None:
        """Apply what a health check saw; the worker as it is now (None: it was removed)."""
        ...

    async def report_unreachable(self, worker_id: str, offline_after: int) -> None:
        """A failed health check; after ``offline_after`` in a row an idle worker goes OFFLINE."""
        ...

    async def forget_offline(self, after_s: float) -> list[WorkerView]:
        """Remove the workers OFFLINE for longer than ``after_s``; those removed."""
        ...

    async def monitored(self) -> list[tuple[str, str]]:
        """(worker id, url) of the workers this gateway health-checks (all of them with one
        gateway; an even share, by lease, with several)."""
        ...

    async def set_pipeline(self, report: PipelineReport) -> None:
        """A pipeline coordinator's report; its session slots bound the voice sessions its
        workers take at once."""
        ...

    # ---- views

    async def pipeline(self) -> PipelineState | None: ...

    async def session_slots(self) -> int | None: ...

    async def workers(self) -> list[WorkerView]: ...

    async def queue(self) -> list[TicketView]:
        """Queued tickets in order, then nothing else (assigned ones are the workers' business)."""
        ...

    async def ticket(self, ticket_id: str) -> TicketView | None: ...

    async def positions(self, ticket_ids: list[str]) -> Positions:
        """Where these tickets stand (one pass over the whole queue)."""
        ...

    async def place(self, ticket: Ticket) -> Positions:
        """Where a ticket this gateway just queued stands: cheap however long the queue is (its wait
        is placed on the last pass's estimate, as the tail it joined)."""
        ...

    async def queue_length(self) -> int: ...

    async def wait_changed(self, within_s: float) -> None:
        """Return when the queue or the workers change, or after ``within_s`` seconds."""
        ...

    async def status(self) -> dict[str, Any]:
        """What ``/health`` says of the store (kind, reachable, the gateways sharing it)."""
        ...
