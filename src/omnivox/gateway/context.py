"""What every gateway route shares: settings, the scheduler store, admission, metrics, the session
registry."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivox.core.config import Settings
from omnivox.gateway.edges.calls import CallRegistry
from omnivox.gateway.edges.client_keys import ClientKeys, KeyStore
from omnivox.gateway.edges.limits import ClientLimits, HeldBytes, Limits
from omnivox.gateway.edges.peers import NoPeers, Peers
from omnivox.gateway.edges.sessions import SessionRegistry
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.gateway.scheduling.admission import Admission
from omnivox.gateway.scheduling.health import HealthMonitor
from omnivox.gateway.scheduling.store import SchedulerStore
from omnivox.recording.service import RecordingService


@dataclass
class GatewayContext:
    settings: Settings
    store: SchedulerStore
    metrics: GatewayMetrics
    admission: Admission
    health: HealthMonitor
    recordings: RecordingService | None = None  # None: this gateway records nothing (tests)
    sessions: SessionRegistry = field(default_factory=SessionRegistry)
    calls: CallRegistry = field(default_factory=CallRegistry)  # WebRTC calls in progress
    peers: Peers = field(default_factory=NoPeers)  # other gateways on the same store
    limits: Limits = field(init=False)
    held_bytes: HeldBytes = field(init=False)  # what all waiting sessions hold, together
    client_keys: KeyStore = field(init=False)  # ephemeral keys not spent yet
    draining: bool = False  # stopping: new sessions are refused, those running go on

    def __post_init__(self) -> None:
        s = self.settings
        self.limits = ClientLimits(s.max_sessions_per_client, s.client_connect_rate, s.client_connect_burst)
        self.held_bytes = HeldBytes(s.queued_bytes_total)
        self.client_keys = ClientKeys(s.client_secrets_max, s.client_secrets_per_client)
