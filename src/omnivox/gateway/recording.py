"""The gateway's recorder and its retention: the recording service built from the settings, and the
background task that finishes orphaned recordings at startup and runs cleanup every
``cleanup_interval_s``."""

from __future__ import annotations

import asyncio
import logging
import time

from omnivox.core.config import Settings
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.recording.cleanup import cleanup
from omnivox.recording.finalize import recover
from omnivox.recording.service import RecordingService
from omnivox.recording.session import Policy
from omnivox.recording.store import RecordingStore

log = logging.getLogger(__name__)


def recording_service(settings: Settings, metrics: GatewayMetrics) -> RecordingService:
    """``record_sessions`` unset (None) records nothing here: ``omnivox serve`` sets it on."""
    policy = Policy(
        default=settings.record_sessions is True,
        allow_opt_out=settings.record_allow_opt_out,
        allow_opt_in=settings.record_allow_opt_in,
        min_free_bytes=settings.record_min_free_mb * 2**20,
    )
    return RecordingService(
        RecordingStore.under(settings.data_dir),
        policy,
        queue_bytes=settings.record_queue_bytes,
        on_dropped=metrics.recording_dropped.inc,
        on_failed=metrics.recording_failures.inc,
    )


async def retention(service: RecordingService, settings: Settings, metrics: GatewayMetrics) -> None:
    """Run for the gateway's life: finish what a previous run left unfinished, then clean up now and
    every ``cleanup_interval_s``. Nothing it meets stops it."""
    store = service.store
    try:
        # at once, not after recover()'s usual quiet period: a recording's lock is taken before its
        # meta.json is written, so one with a meta.json and no lock holder is orphaned however recent
        # (a gateway killed and restarted within seconds leaves its cut sessions finished)
        recovered = await asyncio.to_thread(recover, store, time.time(), 0.0)
        if recovered:
            log.info("finished %d recording(s) a previous run left unfinished", len(recovered))
    except Exception:
        log.exception("recovering unfinished recordings failed")
    while True:
        try:
            report = await asyncio.to_thread(
                cleanup,
                store,
                retention_days=settings.retention_days,
                max_storage_gb=settings.max_storage_gb,
                live=frozenset(service.live()),
            )
            for removal in report.removed:
                metrics.recordings_removed.labels(removal.reason).inc()
            if report.removed:
                log.info("recordings cleanup: %s", report.lines()[-1])
        except Exception:
            log.exception("recordings cleanup failed; retrying in %.0f s", settings.cleanup_interval_s)
        await asyncio.sleep(settings.cleanup_interval_s)
