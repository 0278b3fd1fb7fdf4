"""A worker registers with its gateway and keeps re-registering as a heartbeat.

Gateways that share a store share their workers: a worker registered with one serves the clients
of all. ``gateway_url`` may name several (comma-separated, or a load balancer in front of them):
the worker stays with one while it answers and moves to the next when it does not, so its
heartbeats always reach a live gateway."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from omnivox.core.keys import bearer
from omnivox.protocol.control.workers import Registration, RegistrationReply, WorkerHealth

log = logging.getLogger(__name__)


async def heartbeat_loop(
    gateway_url: str,
    public_url: str,
    health: Callable[[], WorkerHealth],
    interval_s: float,
    key: str | None = None,
) -> None:
    """Register, then re-register every ``interval_s``; a gateway that fails is left for the next
    one (at once), and a round where none answers is logged and retried. ``key``: the worker key
    the gateways ask for (sent as a bearer token)."""
    gateways = [u.strip().rstrip("/") for u in gateway_url.split(",") if u.strip()]
    worker_id: str | None = None
    current = 0
    async with httpx.AsyncClient(timeout=5.0, headers=bearer(key)) as client:
        while True:
            for attempt in range(len(gateways)):
                url = gateways[current]
                body = Registration(url=public_url, worker_id=worker_id, health=health())
                try:
                    resp = await client.post(url + "/api/workers/register", json=body.model_dump(mode="json"))
                    resp.raise_for_status()
                    reply = RegistrationReply.model_validate(resp.json())
                except (httpx.HTTPError, ValueError) as exc:
                    log.warning("gateway %s unreachable: %s", url, exc)
                    current = (current + 1) % len(gateways)
                    continue
                if worker_id != reply.worker_id or attempt:
                    log.info("registered with %s as %s", url, reply.worker_id)
                worker_id = reply.worker_id
                interval_s = reply.heartbeat_interval_s
                break
            await asyncio.sleep(interval_s)
