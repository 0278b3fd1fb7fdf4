"""The gateway's recorder built from its settings, and the retention task: orphans finished at
start, cleanup on its interval, removals counted, and no failure that stops it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from omnivox.core.config import Settings
from omnivox.gateway import recording as module
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.recording import recording_service, retention
from omnivox.recording.cleanup import CleanupReport, Removal
from omnivox.recording.store import SESSIONS_DIR


@pytest.mark.parametrize(("record", "default"), [(None, False), (False, False), (True, True)])
def test_the_policy_follows_the_settings_and_unset_records_nothing(tmp_path, record, default) -> None:
    s = Settings(data_dir=tmp_path, record_sessions=record, record_allow_opt_in=True, record_min_free_mb=3)
    service = recording_service(s, GatewayMetrics())
    assert service.policy.default is default
    assert service.policy.allow_opt_in is True and service.policy.allow_opt_out is s.record_allow_opt_out
    assert service.policy.min_free_bytes == 3 * 2**20
    assert service.store.root == tmp_path / SESSIONS_DIR
    assert service.queue_bytes == s.record_queue_bytes


def test_dropped_frames_and_failures_are_counted_on_the_gateways_metrics(tmp_path) -> None:
    metrics = GatewayMetrics()
    service = recording_service(Settings(data_dir=tmp_path), metrics)
    service.on_dropped(3)
    service.on_failed()
    r = metrics.registry
    assert r.get_sample_value("omnivox_recording_dropped_frames_total") == 3
    assert r.get_sample_value("omnivox_recording_failures_total") == 1


def _removal(reason: str) -> Removal:
    return Removal(recording_id=f"r-{reason}", reason=reason, bytes=10, started_at=0.0, last_used=0.0)


async def test_retention_recovers_once_then_cleans_up_every_interval_and_counts_removals(
    tmp_path, monkeypatch
) -> None:
    settings = Settings(data_dir=tmp_path, retention_days=7, max_storage_gb=1.5, cleanup_interval_s=0.01)
    metrics = GatewayMetrics()
    service = recording_service(settings, metrics)
    recovered: list[tuple[Any, float]] = []
    cleanups: list[dict[str, Any]] = []
    two_rounds = asyncio.Event()
    loop = asyncio.get_running_loop()
    release = threading.Event()

    def recover(store: Any, now: float, quiet: float) -> list[str]:
        recovered.append((store, quiet))
        raise OSError("a broken recording")  # logged; cleanup goes on

    def cleanup(store: Any, **kw: Any) -> CleanupReport:
        cleanups.append(kw)
        if len(cleanups) == 1:
            raise OSError("disk trouble")  # logged; retried next interval
        if len(cleanups) == 4:  # two rounds counted: hold the fourth until the task is cancelled
            loop.call_soon_threadsafe(two_rounds.set)
            release.wait(10)
        return CleanupReport(removed=[_removal("age"), _removal("size"), _removal("age")])

    monkeypatch.setattr(module, "recover", recover)
    monkeypatch.setattr(module, "cleanup", cleanup)
    task = asyncio.create_task(retention(service, settings, metrics))
    await asyncio.wait_for(two_rounds.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert recovered == [(service.store, 0.0)]  # once, with no quiet period
    assert cleanups[0] == {"retention_days": 7, "max_storage_gb": 1.5, "live": frozenset()}
    r = metrics.registry
    # the first failed, the second and third counted, the fourth was cut short by the cancel
    assert r.get_sample_value("omnivox_recordings_removed_total", {"reason": "age"}) == 4
    assert r.get_sample_value("omnivox_recordings_removed_total", {"reason": "size"}) == 2
