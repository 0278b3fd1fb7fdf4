"""The gateway's metrics tap: a worker's reported figures become Prometheus metrics."""

from __future__ import annotations

from omnivox.gateway.edges.sessions import SessionRecord
from omnivox.gateway.edges.taps import MetricsTap
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.protocol.control.internal import Metrics


def test_a_turn_breakdown_is_one_observation_per_known_stage() -> None:
    metrics = GatewayMetrics()
    tap = MetricsTap(metrics, SessionRecord("realtime", "s", 0.0))
    stages = {"decided": 0.52, "transcribed": 0.6, "first_audio_sent": 0.81, "bogus": 9.0}
    tap.apply(Metrics(voice_to_voice_s=0.81, stages_s=stages, response_done=True))
    r = metrics.registry
    for stage, seconds in (("decided", 0.52), ("transcribed", 0.6), ("first_audio_sent", 0.81)):
        labels = {"stage": stage}
        assert r.get_sample_value("omnivox_turn_stage_seconds_count", labels) == 1
        assert r.get_sample_value("omnivox_turn_stage_seconds_sum", labels) == seconds
    # a stage no omnivox knows makes no label (a worker cannot grow the gateway's series)
    assert r.get_sample_value("omnivox_turn_stage_seconds_count", {"stage": "bogus"}) is None
    assert r.get_sample_value("omnivox_voice_to_voice_seconds_count") == 1
