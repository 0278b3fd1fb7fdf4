"""Health checks: poll every worker's ``GET /health`` and keep the pool's view current."""

from __future__ import annotations

import asyncio
import logging

import httpx
from pydantic import ValidationError

from omnivox.gateway.scheduling.pool import WorkerPool, WorkerRecord
from omnivox.protocol.workers import WorkerHealth

log = logging.getLogger(__name__)


def apply_health(pool: WorkerPool, worker: WorkerRecord, health: WorkerHealth) -> None:
    """Copy what a worker says about itself into the pool (state changes go through the pool)."""
    worker.engine = health.engine
    worker.capabilities = health.capabilities
    worker.voices = health.voices
    if not worker.state.busy and not health.state.busy:
        # The worker's own hash is the truth about its cache (it may have restarted empty). Not while
        # it still says busy: the gateway releases a worker at ``done``, a moment before the worker
        # itself winds the session down, and a busy worker reports no hash.
        worker.kv_length = health.kv_length
        worker.cached_hash = health.cached_hash
    pool.report_health(worker, health.state, health.error)


async def check_worker(
    pool: WorkerPool, client: httpx.AsyncClient, worker: WorkerRecord, offline_after: int
) -> None:
    try:
        resp = await client.get(worker.url.rstrip("/") + "/health")
        resp.raise_for_status()
        health = WorkerHealth.model_validate(resp.json())
    except (httpx.HTTPError, ValidationError, ValueError) as exc:
        log.debug("health check of %s failed: %s", worker.worker_id, exc)
        pool.report_unreachable(worker, offline_after)
        return
    apply_health(pool, worker, health)


async def health_loop(pool: WorkerPool, interval_s: float, timeout_s: float, offline_after: int) -> None:
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        while True:
            workers = list(pool.workers.values())
            await asyncio.gather(*(check_worker(pool, client, w, offline_after) for w in workers))
            await asyncio.sleep(interval_s)
