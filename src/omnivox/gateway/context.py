"""What every gateway route shares: settings, the pool, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.gateway.admission import Admission
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.pool import WorkerPool
from omnivox.gateway.sessions import SessionRegistry


@dataclass
class GatewayContext:
    settings: Settings
    pool: WorkerPool
    metrics: GatewayMetrics
    admission: Admission
    sessions: SessionRegistry = field(default_factory=SessionRegistry)


def ws_url(http_url: str, path: str) -> str:
    base = http_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + path
    return "ws://" + base.removeprefix("http://") + path
