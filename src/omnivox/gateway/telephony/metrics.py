"""The phone edge's Prometheus metrics, on the gateway's registry (``/metrics``): SIP calls and
RTP ports in use, INVITEs refused by status, RTP packets dropped by reason, outbound dials by
outcome. A refusal or a drop is counted, never answered with more than its SIP status."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class TelephonyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.sip_calls = Gauge("omnivox_sip_calls", "SIP calls in progress (ringing or answered)", registry=r)
        self.rtp_ports = Gauge("omnivox_rtp_ports_in_use", "RTP ports held by SIP calls", registry=r)
        self.refused = Counter(
            "omnivox_sip_refused", "INVITEs refused (never a session), by SIP status", ["status"], registry=r
        )
        self.rtp_dropped = Counter(
            "omnivox_rtp_dropped_packets",
            "RTP packets dropped: from a third party (foreign), not RTP or not agreed (malformed), "
            "past the per-call rate (flooded)",
            ["reason"],
            registry=r,
        )
        self.dials = Counter(
            "omnivox_sip_dials",
            "Outbound calls by outcome (answered, busy, no_answer, ...)",
            ["outcome"],
            registry=r,
        )
