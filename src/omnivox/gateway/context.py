"""What every gateway route shares: settings, the pool, admission, metrics, the session registry."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.gateway.edges.sessions import SessionRegistry
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.admission import Admission
from omnivox.gateway.scheduling.pool import WorkerPool


@dataclass
class GatewayContext:
    settings: Settings
    pool: WorkerPool
    metrics: GatewayMetrics
    admission: Admission
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
