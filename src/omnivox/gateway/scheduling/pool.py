"""The worker pool: a FIFO queue of tickets, cache-aware routing and the single dispatch point.

Everything here runs on the gateway's event loop and never awaits, so no two coroutines can see a
worker half-assigned. ``_dispatch`` is the only place a worker is assigned; it runs when a ticket is
enqueued, a worker is released, a ticket is cancelled, or a worker comes (back) online. A worker is
marked busy, and its fencing epoch bumped, in the same step that resolves the ticket's future.

The gateway reaches it through ``MemoryStore`` (``memory_store``), one of the two scheduler stores.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from omnivox.core import clock as clocks
from omnivox.core.errors import QueueFull, TicketCancelled, TooManyWorkers, WorkerUnavailable
from omnivox.core.ids import new_id
from omnivox.gateway.scheduling.eta import DurationModel, WaitPlan
from omnivox.gateway.scheduling.states import WorkerState, check_transition
from omnivox.gateway.scheduling.store import KEEP, Assignment, Ticket, WorkerView
from omnivox.protocol.control.workers import TASKS, Capabilities, WorkerHealth

__all__ = ["PIPELINE_ENGINE", "SLOTTED_TASKS", "UNTAKEN_ASSIGNMENT_S", "Ticket", "WorkerPool", "WorkerRecord"]

# An assignment its worker has not taken this long after it was made is dead: its gateway opens the
# worker within its connect timeout (5 s by default) or is reaped with its lease, and the worker
# starts it within its session wait (5 s) or refuses it. The worker's own IDLE report then frees it
# (scheduler.lua has the same, from scripts.py).
UNTAKEN_ASSIGNMENT_S = 15.0

# sessions that hold a pipeline's session slot (the ASR's) for their life, on `pipeline` workers
SLOTTED_TASKS = frozenset({"realtime", "audio_duplex", "omni_duplex"})
PIPELINE_ENGINE = "pipeline"


@dataclass(eq=False)
class WorkerRecord:
    worker_id: str
    url: str  # http(s) base URL of the worker
    state: WorkerState = WorkerState.LOADING
    engine: str = ""
    capabilities: Capabilities = field(default_factory=Capabilities)
    cached_hash: str | None = None  # history hash of the conversation its KV cache holds
    last_cache_used_at: float = 0.0  # monotonic time the cache was last written
    ticket_id: str | None = None  # the ticket it is serving
    task_type: str | None = None
    busy_since: float | None = None
    health_failures: int = 0
    sessions_served: int = 0
    kv_length: int = 0
    voices: list[str] = field(default_factory=list)
    error: str | None = None
    problems: list[str] = field(default_factory=list)  # what it says is wrong (e.g. its LLM server)
    offline_since: float | None = None  # when it went OFFLINE (it is forgotten after a while)
    epoch: int = 0  # fencing counter: bumped by every assignment, never below what the worker saw

    def can_serve(self, task_type: str) -> bool:
        return self.capabilities.serves(task_type)

    def view(self, now: float) -> WorkerView:
        return WorkerView(
            worker_id=self.worker_id,
            url=self.url,
            state=self.state,
            engine=self.engine,
            capabilities=self.capabilities,
            cached_hash=self.cached_hash,
            cache_age_s=round(now - self.last_cache_used_at, 3) if self.cached_hash else None,
            ticket_id=self.ticket_id,
            task_type=self.task_type,
            busy_for_s=round(now - self.busy_since, 3) if self.busy_since is not None else None,
            sessions_served=self.sessions_served,
            kv_length=self.kv_length,
            voices=tuple(self.voices),
            error=self.error,
            problems=tuple(self.problems),
            epoch=self.epoch,
        )


class WorkerPool:
    """Queue + workers. Not thread-safe: use it from the event loop only."""

    def __init__(
        self,
        max_queue_size: int = 1000,
        durations: DurationModel | None = None,
        clock: clocks.Clock = clocks.monotonic,
        loop: asyncio.AbstractEventLoop | None = None,
        max_workers: int = 64,
    ) -> None:
        self._loop = loop  # None: the running loop (tests drive the pool without running one)
        self.max_queue_size = max_queue_size
        self.max_workers = max_workers
        self.durations = durations or DurationModel()
        self.clock = clock
        self.workers: dict[str, WorkerRecord] = {}
        self._queue: OrderedDict[str, Ticket] = OrderedDict()
        self._active: dict[str, Ticket] = {}  # assigned tickets by id, until released
        # tickets out of the line whose clients may come back (``orphan``), oldest grace first
        self._orphans: OrderedDict[str, tuple[Ticket, float]] = OrderedDict()
        self._seq = itertools.count(1)
        self._changed = asyncio.Event()
        # positions and ETAs of queued tickets; None when a change made them stale. A ticket added
        # at the tail extends it in place: it moves nobody, so waiters are not woken for it.
        self._snapshot: dict[str, tuple[int, float]] | None = None
        self._plan: WaitPlan | None = None
        self._snapshot_at = 0.0
        # sessions a staged pipeline serves at once (None: no pipeline reports a limit); voice
        # sessions on pipeline workers past it wait in the queue
        self.session_slots: int | None = None

    # ---- workers

    def add_worker(self, url: str, worker_id: str | None = None) -> WorkerRecord:
        """Add a worker (LOADING until its health says otherwise); re-adding a known URL returns it.

        The gateway names workers: a wished-for ``worker_id`` is taken only if nobody has it, so a
        registration can never take over another worker's record. Raises ``TooManyWorkers`` past
        ``max_workers``."""
        for w in self.workers.values():
            if w.url == url:
                return w
        if len(self.workers) >= self.max_workers:
            raise TooManyWorkers(f"the gateway holds its limit of {self.max_workers} workers")
        if worker_id is None or worker_id in self.workers:
            worker_id = new_id("w")
        record = WorkerRecord(worker_id=worker_id, url=url)
        self.workers[record.worker_id] = record
        self._touch()
        return record

    def set_state(self, worker: WorkerRecord, state: WorkerState) -> None:
        worker.state = check_transition(worker.state, state)
        worker.offline_since = self.clock() if state is WorkerState.OFFLINE else None
        self._touch()

    def apply_health(self, worker: WorkerRecord, health: WorkerHealth) -> None:
        """Copy what a worker says about itself into the pool (state changes go through
        ``report_health``)."""
        worker.engine = health.engine
        worker.capabilities = health.capabilities
        worker.voices = health.voices
        worker.problems = health.problems
        serving = worker.state.busy and worker.ticket_id is not None
        if serving and health.state is WorkerState.IDLE and worker.epoch > 0:
            # The invariant (as scheduler.lua's report_health): a worker held busy is freed within a
            # bounded time once no live session holds it, on its own IDLE word. It took this
            # assignment's session and is free again, yet no release came (the gateway relaying it
            # lost track of it in a store failure): the session is over. Or it never took it, though
            # UNTAKEN_ASSIGNMENT_S have passed: no gateway is about to open it; it is dead. A newer
            # session's assignment stays younger than that until taken (fencing holds).
            if health.epoch >= worker.epoch:
                self.release(worker, ticket_id=worker.ticket_id)
            elif worker.busy_since is not None and self.clock() - worker.busy_since >= UNTAKEN_ASSIGNMENT_S:
                self._finish(worker)  # nothing was served: nothing measured, nothing counted
                worker.busy_since = None
                self.set_state(worker, WorkerState.IDLE)
                self._dispatch()
            serving = worker.state.busy and worker.ticket_id is not None  # (a new one, maybe)
        worker.epoch = max(worker.epoch, health.epoch)  # the next assignment is newer than any it saw
        if not serving and not health.state.busy:
            # The worker's own hash is the truth about its cache (it may have restarted empty). Not
            # while it serves one of our sessions, nor while it says busy: a busy worker reports no hash.
            worker.kv_length = health.kv_length
            worker.cached_hash = health.cached_hash
        self.report_health(worker, health.state, health.error)

    def report_health(self, worker: WorkerRecord, reported: WorkerState, error: str | None = None) -> None:
        """Apply what a health check saw.

        A worker serving one of our tickets keeps its gateway-side state. Otherwise the worker's own
        word decides: one that says it is still busy (a session whose client left is winding down) is
        not handed out until it says it is free."""
        worker.health_failures = 0
        worker.error = error
        if worker.state.busy and worker.ticket_id is not None:
            return
        if reported in (WorkerState.LOADING, WorkerState.ERROR) or reported.busy:
            target = reported
        else:
            target = WorkerState.IDLE
        if target is not worker.state:
            if target.busy and worker.state is not WorkerState.IDLE:
                return  # busy either way, or not to be handed out anyway (loading, offline)
            self.set_state(worker, target)
            if target is WorkerState.IDLE:
                self._dispatch()

    def report_unreachable(self, worker: WorkerRecord, offline_after: int = 1) -> None:
        """A failed health check; after ``offline_after`` in a row an idle worker goes OFFLINE."""
        worker.health_failures += 1
        if worker.health_failures >= offline_after and not worker.state.busy:
            self.mark_offline(worker)

    def mark_offline(self, worker: WorkerRecord) -> None:
        """The worker is gone (also mid-session). Its cache and assignment are forgotten."""
        if worker.state is WorkerState.OFFLINE:
            return
        self._finish(worker)
        worker.cached_hash = None
        self.set_state(worker, WorkerState.OFFLINE)
        self._dispatch()  # a now-impossible ticket may need failing; others keep moving

    def remove_worker(self, worker_id: str) -> None:
        worker = self.workers.get(worker_id)
        if worker is not None:
            self.mark_offline(worker)
            del self.workers[worker_id]
            self._touch()

    # ---- tickets

    def enqueue(self, task_type: str, history_hash: str | None = None) -> Ticket:
        """Queue a ticket and dispatch. Raises QueueFull (nothing queued) or WorkerUnavailable."""
        if task_type not in TASKS:
            raise ValueError(f"unknown task type {task_type!r}")
        if self.workers and not any(
            w.can_serve(task_type) for w in self.workers.values() if w.state is not WorkerState.ERROR
        ):
            raise WorkerUnavailable(f"no worker in the pool can serve {task_type!r} sessions")
        ticket = Ticket(
            ticket_id=new_id("t"),
            task_type=task_type,
            history_hash=history_hash,
            future=(self._loop or asyncio.get_running_loop()).create_future(),
            enqueued_at=self.clock(),
            seq=next(self._seq),
        )
        self._queue[ticket.ticket_id] = ticket
        self._dispatch()
        if ticket.worker_id is None and len(self._queue) > self.max_queue_size:
            del self._queue[ticket.ticket_id]  # it was last: nobody else moved
            ticket.future.cancel()
            raise QueueFull(
                f"the queue is full ({self.max_queue_size} waiting)", max_queue_size=self.max_queue_size
            )
        if ticket.worker_id is None and self._snapshot is not None and self._plan is not None:
            wait = self._plan.add(task_type)
            self._snapshot[ticket.ticket_id] = (len(self._snapshot) + 1, round(wait, 1))
        return ticket

    def cancel(self, ticket_id: str) -> bool:
        """Cancel a queued ticket: its waiter gets TicketCancelled. False if it is not queued."""
        ticket = self._queue.pop(ticket_id, None)
        if ticket is None:
            return False
        if not ticket.future.done():
            ticket.future.set_exception(TicketCancelled(f"ticket {ticket_id} was cancelled"))
            ticket.future.exception()  # mark retrieved: a waiter that vanished must not warn
        self._touch()
        self._dispatch()
        return True

    def orphan(self, ticket: Ticket, grace_s: float) -> bool:
        """A queued ticket steps out of the line for ``grace_s`` s, keeping its place (its client
        may come back: ``reattach``). False if it is not queued (or no longer this waiter's)."""
        self._sweep_orphans()
        if self._queue.get(ticket.ticket_id) is not ticket:
            return False
        del self._queue[ticket.ticket_id]
        self._orphans[ticket.ticket_id] = (ticket, self.clock() + grace_s)
        self._touch()
        return True

    def reattach(self, ticket_id: str, task_type: str) -> Ticket | None:
        """A ticket for a client that came back: an orphan goes back into the line at its old place;
        one still queued (its old connection not yet seen gone) keeps its place and its old waiter
        hears it was cancelled. Either way a new ``Ticket`` with a new future, which may be assigned
        at once. None if there is no such ticket, or it waits for another kind of session."""
        self._sweep_orphans()
        orphaned = self._orphans.get(ticket_id)
        old = orphaned[0] if orphaned is not None else self._queue.get(ticket_id)
        if old is None or old.task_type != task_type:
            return None
        ticket = dataclasses.replace(old, future=(self._loop or asyncio.get_running_loop()).create_future())
        if orphaned is not None:
            del self._orphans[ticket_id]
            self._insert_in_order(ticket)
        else:
            self._queue[ticket_id] = ticket  # (an existing key keeps its place)
            if not old.future.done():
                old.future.set_exception(TicketCancelled(f"ticket {ticket_id} went to a new connection"))
                old.future.exception()  # marked retrieved: the old waiter may be gone already
        self._touch()
        self._dispatch()
        return ticket

    def requeue(self, ticket: Ticket, refused: Assignment, *, lost: bool = False) -> Ticket | None:
        """The worker of ``refused`` did not take its session (it serves a newer assignment, is
        busy, or could not be reached): the ticket goes back into the line at its old place (its
        seq: ahead of everyone who came after it) for the next worker, and may be assigned at once.
        A worker still on this assignment is not handed out again until its own health says it is
        free (as an unconfirmed release; no duration is measured: nothing was served); ``lost``:
        it could not be reached, and goes OFFLINE (unless it was assigned anew since). A new
        ``Ticket`` with a new future; None if the ticket is queued or orphaned already (never two
        places for one client) or is another assignment's now."""
        ticket_id = ticket.ticket_id
        self._sweep_orphans()
        if ticket_id in self._queue or ticket_id in self._orphans:
            return None
        active = self._active.get(ticket_id)
        if active is not None and not _assigned_as(active, refused):
            return None  # assigned anew since: that assignment is the one it holds
        self._active.pop(ticket_id, None)
        worker = self.workers.get(refused.worker_id)
        if worker is not None and worker.epoch == refused.epoch:
            if lost:
                self.mark_offline(worker)
            elif worker.ticket_id == ticket_id:
                self._finish(worker)
                worker.busy_since = None
        again = dataclasses.replace(
            ticket,
            future=(self._loop or asyncio.get_running_loop()).create_future(),
            worker_id=None,
            cache_hit=False,
        )
        self._insert_in_order(again)
        self._touch()
        self._dispatch()
        return again

    def _insert_in_order(self, ticket: Ticket) -> None:
        """Put a ticket back into the line at its seq (its place when it first queued)."""
        queued = list(self._queue.items())
        at = bisect.bisect(queued, ticket.seq, key=lambda item: item[1].seq)
        queued.insert(at, (ticket.ticket_id, ticket))
        self._queue = OrderedDict(queued)

    def _sweep_orphans(self) -> None:
        now = self.clock()
        while self._orphans:
            ticket_id, (_, until) = next(iter(self._orphans.items()))
            if until > now:
                break
            del self._orphans[ticket_id]

    def release(
        self,
        worker: WorkerRecord,
        *,
        cached_hash: str | None = KEEP,
        ticket_id: str | None = None,
        confirmed: bool = True,
    ) -> None:
        """End the worker's assignment. ``cached_hash`` is what its cache now holds (None: nothing).

        With ``ticket_id`` only that assignment is ended: a caller releasing late (the worker was
        already released and given to the next ticket) cannot free someone else's session.
        ``confirmed=False``: the session ended without the worker saying it was done (its client
        left mid-turn); the worker stays busy until its own health says it is free."""
        if not worker.state.busy:
            return  # already released, or lost (OFFLINE) meanwhile
        if ticket_id is not None and worker.ticket_id != ticket_id:
            return  # that assignment is over; the worker serves another ticket now
        ticket = self._finish(worker)
        if ticket is not None:
            started = worker.busy_since if worker.busy_since is not None else ticket.enqueued_at
            self.durations.observe(ticket.task_type, self.clock() - started)
        if cached_hash is not KEEP:
            worker.cached_hash = cached_hash
            worker.last_cache_used_at = self.clock()
        worker.busy_since = None
        worker.sessions_served += 1
        if not confirmed:
            self._touch()
            return
        self.set_state(worker, WorkerState.IDLE)
        self._dispatch()

    def set_paused(self, worker: WorkerRecord, paused: bool) -> None:
        if worker.state in (WorkerState.DUPLEX_ACTIVE, WorkerState.DUPLEX_PAUSED):
            self.set_state(worker, WorkerState.DUPLEX_PAUSED if paused else WorkerState.DUPLEX_ACTIVE)

    def set_session_slots(self, slots: int | None) -> None:
        """What the pipeline coordinator reports; more slots may let queued sessions through."""
        if slots != self.session_slots:
            self.session_slots = slots
            self._touch()
            self._dispatch()

    def slots_used(self) -> int:
        return sum(1 for w in self.workers.values() if self._holds_slot(w))

    @staticmethod
    def _holds_slot(worker: WorkerRecord) -> bool:
        return worker.state.busy and worker.engine == PIPELINE_ENGINE and worker.task_type in SLOTTED_TASKS

    # ---- views

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    def queued(self) -> list[Ticket]:
        return list(self._queue.values())

    def ticket(self, ticket_id: str) -> Ticket | None:
        return self._queue.get(ticket_id) or self._active.get(ticket_id)

    def position(self, ticket_id: str) -> tuple[int, float] | None:
        """(1-based position, estimated wait in seconds from now) of a queued ticket."""
        entry = self.snapshot().get(ticket_id)
        if entry is None:
            return None
        position, wait = entry
        return position, round(max(0.0, wait - (self.clock() - self._snapshot_at)), 1)

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """Positions and waits of all queued tickets, recomputed only after a change."""
        if self._snapshot is not None:
            return self._snapshot
        now = self.clock()
        remaining = []
        for w in self.workers.values():
            if w.state is WorkerState.IDLE or w.state is WorkerState.LOADING:
                remaining.append(0.0)
            elif w.state.busy and w.task_type is not None and w.busy_since is not None:
                remaining.append(self.durations.expected(w.task_type) - (now - w.busy_since))
        plan = WaitPlan(remaining, self.durations)
        self._snapshot_at = now
        self._snapshot = {
            t.ticket_id: (i + 1, round(plan.add(t.task_type), 1)) for i, t in enumerate(self._queue.values())
        }
        self._plan = plan
        return self._snapshot

    async def wait_changed(self, within_s: float) -> None:
        """Return when the queue or the workers change, or after ``within_s`` seconds."""
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), within_s)
        except TimeoutError:
            pass

    # ---- internals

    def _touch(self) -> None:
        """Something that can move queued tickets or change their ETA happened: wake the waiters."""
        self._snapshot = None
        self._plan = None
        self._changed.set()
        self._changed = asyncio.Event()

    def _finish(self, worker: WorkerRecord) -> Ticket | None:
        ticket = self._active.pop(worker.ticket_id, None) if worker.ticket_id else None
        worker.ticket_id = None
        worker.task_type = None
        return ticket

    def _route(self, ticket: Ticket, idle: list[WorkerRecord]) -> WorkerRecord | None:
        """Cache-aware choice of an idle worker (MiniCPM-o's): hash match, no cache, least recently used."""
        able = [w for w in idle if w.can_serve(ticket.task_type)]
        if not able:
            return None
        if ticket.task_type == "streaming" and ticket.history_hash is not None:
            for w in able:
                if w.cached_hash == ticket.history_hash:
                    return w
        for w in able:
            if w.cached_hash is None:
                return w
        return min(able, key=lambda w: w.last_cache_used_at)

    def _dispatch(self) -> None:
        """The single place a worker is assigned: walk the queue in order, give each an idle worker.

        The walk stops as soon as no idle worker is left, so a release costs O(1) however long the
        queue is (with one kind of worker; tickets no idle worker can serve are stepped over).
        """
        idle = [w for w in self.workers.values() if w.state is WorkerState.IDLE]
        if not idle or not self._queue:
            return
        stale: list[Ticket] = []
        matches: list[tuple[Ticket, WorkerRecord]] = []
        free = None if self.session_slots is None else self.session_slots - self.slots_used()
        for ticket in self._queue.values():
            if not idle:
                break
            if ticket.future.done():  # its waiter went away without cancelling
                stale.append(ticket)
                continue
            able = idle
            if free is not None and free <= 0 and ticket.task_type in SLOTTED_TASKS:
                able = [w for w in idle if w.engine != PIPELINE_ENGINE]  # no slot: it waits for one
            worker = self._route(ticket, able)
            if worker is not None and free is not None and ticket.task_type in SLOTTED_TASKS:
                free -= worker.engine == PIPELINE_ENGINE
            if worker is not None:
                idle.remove(worker)
                matches.append((ticket, worker))
        for ticket in stale:
            del self._queue[ticket.ticket_id]
        for ticket, worker in matches:
            self._assign(ticket, worker)
        if stale or matches:
            self._touch()

    def _assign(self, ticket: Ticket, worker: WorkerRecord) -> None:
        busy_state, _ = TASKS[ticket.task_type]
        self.set_state(worker, busy_state)  # busy in the same step: never assigned twice
        worker.ticket_id = ticket.ticket_id
        worker.task_type = ticket.task_type
        worker.busy_since = self.clock()
        worker.epoch += 1
        ticket.worker_id = worker.worker_id
        ticket.cache_hit = ticket.history_hash is not None and worker.cached_hash == ticket.history_hash
        del self._queue[ticket.ticket_id]
        self._active[ticket.ticket_id] = ticket
        ticket.future.set_result(
            Assignment(
                ticket_id=ticket.ticket_id,
                worker_id=worker.worker_id,
                url=worker.url,
                engine=worker.engine,
                task_type=ticket.task_type,
                epoch=worker.epoch,
                cache_hit=ticket.cache_hit,
            )
        )


def _assigned_as(ticket: Ticket, assignment: Assignment) -> bool:
    """Whether ``assignment`` is the one ``ticket`` holds."""
    future = ticket.future
    return (
        future.done()
        and not future.cancelled()
        and future.exception() is None
        and future.result() == assignment
    )
