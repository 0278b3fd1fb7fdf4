"""Gateways sharing a store: leases, reaping, and re-assertion.

Each gateway renews its lease (``{ovx}:gws``) every third of it and reaps every gateway whose lease
ran out: the dead one's queued tickets leave the queue (the others keep their order), the workers it
relayed stay busy until their own health says they are free, its health-check duties (monitor
leases) pass to the live gateways, its inbox and counters go.

A beat also tells a gateway what happened to the store and to itself:

- ``joined``/``ok``: nothing to do;
- ``fresh``: the store restarted empty (or failed over to a replica that lacks the last writes);
- ``reaped``: this gateway paused past its lease and the others dropped what it held.

Either way it re-asserts what it owns: its waiting tickets with their original order, the
assignments it relays with their epochs (never over a newer one). The store only ever holds soft
state that live gateways and workers can rebuild; after a restart it holds dispatch back for one
lease, so every live gateway re-asserts before any worker is handed out again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster.inbox import Inbox
from omnivox.gateway.cluster.pending import Pending

log = logging.getLogger(__name__)


class Member(Protocol):
    """What membership needs of the store of the gateway it keeps in the cluster."""

    gateway_id: str
    lease_s: float
    resume_grace_ms: int  # how long a reaped gateway's waiters keep their places
    info: dict[str, Any]
    inbox: Inbox
    pending: Pending
    beat_hooks: list[Callable[[bool], Awaitable[None]]]

    async def call(self, op: str, *args: str | int | float) -> Any: ...

    def held(self) -> tuple[list[Any], list[Any]]: ...

    def resolve(self, entries: list[Any]) -> None: ...


class Membership:
    def __init__(self, store: Member) -> None:
        self.store = store
        self.boot = ""  # the store's incarnation this gateway knows
        self._said_down = False

    @property
    def lease_ms(self) -> int:
        return round(self.store.lease_s * 1000)

    async def run(self) -> None:
        """Beat, retry what is pending, reap; every third of the lease."""
        while True:
            try:
                await self.beat()
                await self.store.pending.retry()
                await self.reap()
            except StoreUnavailable as err:
                if not self._said_down:
                    log.warning("scheduler store unreachable, new sessions are refused: %s", err.message)
                    self._said_down = True
            else:
                if self._said_down:
                    log.info("scheduler store reachable again")
                    self._said_down = False
            await asyncio.sleep(self.store.lease_s / 3)

    async def beat(self) -> str:
        """Renew this gateway's lease; re-assert when the store lost its state or reaped this
        gateway. The status of the beat."""
        store = self.store
        hold_ms = self.lease_ms + self.lease_ms // 3  # every live gateway beats within it
        status, boot, now_ms = await store.call(
            "beat",
            store.gateway_id,
            self.boot,
            self.lease_ms,
            json.dumps(store.info),
            secrets.token_hex(8),
            hold_ms,
        )
        lost = status in ("fresh", "reaped")
        self.boot = boot
        if lost:
            log.warning("scheduler store %s: re-asserting what this gateway holds", status)
            if status == "fresh":
                store.inbox.restart()
        if lost or (status == "joined" and any(store.held())):
            # only a reap undid what was assigned before (it released those workers); a store that
            # lost its state lost the assignments with it, and one made there since, before this
            # re-assertion (a restarted store serves until its first beat), is real
            await self.reassert(int(now_ms) if status == "reaped" else 0)
        for hook in store.beat_hooks:
            await hook(lost)
        return status

    async def reassert(self, undone_before_ms: int = 0) -> None:
        """Put back what this gateway holds; an assignment of a waiting ticket made before
        ``undone_before_ms`` (the store's time; 0: none) is undone."""
        store = self.store
        waiting, serving = store.held()
        for w in waiting:
            w.reasserted_ms = max(w.reasserted_ms, undone_before_ms)
        args: list[str | int] = [store.gateway_id, len(waiting)]
        for w in waiting:
            args += [w.ticket.ticket_id, w.seq, w.ticket.task_type, w.ticket.history_hash or "", w.enq_ms]
        args.append(len(serving))
        for s in serving:
            a = s.assignment
            args += [a.ticket_id, a.worker_id, a.url, a.epoch, a.task_type, s.busy_ms, s.seq, s.enq_ms]
        reply = await store.call("reassert", *args)
        store.resolve(reply[1])
        log.info("re-asserted %d waiting tickets and %d sessions", len(waiting), len(serving))

    async def reap(self) -> list[str]:
        """Reap the gateways whose lease ran out; their ids."""
        reaped, dispatched = await self.store.call("reap", self.store.gateway_id, self.store.resume_grace_ms)
        for gateway in reaped:
            log.warning("gateway %s stopped renewing its lease: reaped", gateway)
        self.store.resolve(dispatched)
        return list(reaped)

    async def status(self, url: str | None, up: bool, pending: int) -> dict[str, Any]:
        """What ``/health`` says of the store: reachable, operations waiting, the live gateways."""
        store = self.store
        body: dict[str, Any] = {
            "kind": "redis",
            "url": url,
            "up": up,
            "gateway_id": store.gateway_id,
            "pending_operations": pending,
            "malformed_inbox_events": store.inbox.malformed,  # skipped, each logged once
        }
        try:
            now_ms, live = await store.call("gateways")
        except StoreUnavailable:
            body["up"] = False
            return body
        body["gateways"] = [
            {
                **json.loads(info),
                "gateway_id": gw,
                "lease_left_s": round((float(exp) - int(now_ms)) / 1000, 1),
                "self": gw == store.gateway_id,
            }
            for gw, exp, info in live
        ]
        return body
