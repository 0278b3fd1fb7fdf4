"""A worker registers with its gateway and keeps re-registering as a heartbeat."""

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
    """Register, then re-register every ``interval_s``; failures are logged and retried. ``key``:
    the worker key the gateway asks for (sent as a bearer token)."""
    worker_id: str | None = None
    async with httpx.AsyncClient(
        base_url=gateway_url.rstrip("/"), timeout=5.0, headers=bearer(key)
    ) as client:
        while True:
            body = Registration(url=public_url, worker_id=worker_id, health=health())
            try:
                resp = await client.post("/api/workers/register", json=body.model_dump(mode="json"))
                resp.raise_for_status()
                reply = RegistrationReply.model_validate(resp.json())
                if worker_id != reply.worker_id:
                    log.info("registered with %s as %s", gateway_url, reply.worker_id)
                worker_id = reply.worker_id
                interval_s = reply.heartbeat_interval_s
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("gateway %s unreachable: %s", gateway_url, exc)
            await asyncio.sleep(interval_s)
