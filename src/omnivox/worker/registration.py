"""A worker registers with its gateway and keeps re-registering as a heartbeat.

Gateways that share a store share their workers: a worker registered with one serves the clients
of all. ``gateway_url`` may name several (comma-separated, or a load balancer in front of them):
the worker stays with one while it answers and moves to the next when it does not, so its
heartbeats always reach a live gateway.

A process with several seats (``worker.seats``) registers them all in one request a round
(``POST /api/workers/register/seats``), not one each; at a gateway that does not know that path
(one from before it) each seat registers on its own, as a process of one seat always does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import httpx

from omnivox.core.keys import bearer
from omnivox.protocol.control.workers import (
    Registration,
    RegistrationReply,
    SeatsRegistration,
    SeatsRegistrationReply,
    WorkerHealth,
)

log = logging.getLogger(__name__)


async def heartbeat_loop(
    gateway_url: str,
    seats: Sequence[tuple[str, Callable[[], WorkerHealth]]],
    interval_s: float,
    key: str | None = None,
) -> None:
    """Register each seat (its public URL, and its health), then re-register them every
    ``interval_s``; a gateway that fails is left for the next one (at once), and a round where none
    answers is logged and retried. ``key``: the worker key the gateways ask for (sent as a bearer
    token)."""
    gateways = [u.strip().rstrip("/") for u in gateway_url.split(",") if u.strip()]
    worker_ids: list[str | None] = [None] * len(seats)
    together = len(seats) > 1  # in one request (until a gateway says it has no such path)
    current = 0
    async with httpx.AsyncClient(timeout=5.0, headers=bearer(key)) as client:
        while True:
            for attempt in range(len(gateways)):
                url = gateways[current]
                bodies = [
                    Registration(url=public_url, worker_id=worker_id, health=health())
                    for (public_url, health), worker_id in zip(seats, worker_ids, strict=True)
                ]
                try:
                    replies = await _register_together(client, url, bodies) if together else None
                    if replies is None:
                        together = False
                        replies = [await _register(client, url, body) for body in bodies]
                except (httpx.HTTPError, ValueError) as exc:
                    log.warning("gateway %s unreachable: %s", url, exc)
                    current = (current + 1) % len(gateways)
                    continue
                for seat, reply in enumerate(replies):
                    if worker_ids[seat] != reply.worker_id or attempt:
                        log.info("registered with %s as %s", url, reply.worker_id)
                    worker_ids[seat] = reply.worker_id
                interval_s = replies[0].heartbeat_interval_s
                break
            await asyncio.sleep(interval_s)


async def _register(client: httpx.AsyncClient, gateway: str, body: Registration) -> RegistrationReply:
    resp = await client.post(gateway + "/api/workers/register", json=body.model_dump(mode="json"))
    resp.raise_for_status()
    return RegistrationReply.model_validate(resp.json())


async def _register_together(
    client: httpx.AsyncClient, gateway: str, bodies: list[Registration]
) -> list[RegistrationReply] | None:
    """Every seat in one request; None: the gateway has no such path (it is older: ask seat by seat)."""
    body = SeatsRegistration(seats=bodies)
    resp = await client.post(gateway + "/api/workers/register/seats", json=body.model_dump(mode="json"))
    if resp.status_code in (404, 405):
        return None
    resp.raise_for_status()
    replies = SeatsRegistrationReply.model_validate(resp.json()).seats
    if len(replies) != len(bodies):
        raise ValueError(f"{len(replies)} registrations answered for {len(bodies)} seats")
    return replies
