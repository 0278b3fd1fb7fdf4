"""What every gateway route shares: settings, the pool, admission, metrics, the session registry."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.gateway.edges.calls import CallRegistry
from omnivox.gateway.edges.client_keys import ClientKeys
from omnivox.gateway.edges.limits import ClientLimits
from omnivox.gateway.edges.sessions import SessionRegistry
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.admission import Admission
from omnivox.gateway.scheduling.health import HealthMonitor
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.protocol.control.pipeline import PipelineReport
from omnivox.recording.service import RecordingService


@dataclass
class GatewayContext:
    settings: Settings
    pool: WorkerPool
    metrics: GatewayMetrics
    admission: Admission
    health: HealthMonitor
    recordings: RecordingService | None = None  # None: this gateway records nothing (tests)
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
    calls: CallRegistry = field(default_factory=CallRegistry)  # WebRTC calls in progress
    pipeline: PipelineReport | None = None  # the pipeline coordinator's last report, if one reports
    pipeline_at: float = 0.0  # monotonic time of that report
    limits: ClientLimits = field(init=False)
    client_keys: ClientKeys = field(init=False)  # ephemeral keys not spent yet

    def __post_init__(self) -> None:
        s = self.settings
        self.limits = ClientLimits(s.max_sessions_per_client, s.client_connect_rate, s.client_connect_burst)
        self.client_keys = ClientKeys(s.client_secrets_max)
