"""The gateway's metrics tap: what workers report in internal frames becomes Prometheus metrics."""

from __future__ import annotations

from omnivox.agent.breakdown import STAGES
from omnivox.connection.taps import Frame
from omnivox.gateway.edges.sessions import SessionRecord
from omnivox.gateway.metrics import GatewayMetrics
from omnivox.protocol.control.internal import Metrics, parse_internal


class MetricsTap:
    def __init__(self, metrics: GatewayMetrics, record: SessionRecord) -> None:
        self.metrics = metrics
        self.record = record

    async def see(self, frame: Frame) -> None:
        if not frame.internal or not isinstance(frame.data, str):
            return
        report = parse_internal(frame.data)
        if isinstance(report, Metrics):
            self.apply(report)

    def apply(self, m: Metrics) -> None:
        metrics = self.metrics
        if m.error_code is not None:
            metrics.error(m.error_code)
        if m.cache_hit is not None:
            (metrics.cache_hits if m.cache_hit else metrics.cache_misses).inc()
        if m.ttft_s is not None:
            metrics.ttft.labels(m.ttft_cache or "miss").observe(m.ttft_s)
        if m.turn_done:
            metrics.turns.inc()
            self.record.turns += 1
        if m.voice_to_voice_s is not None:
            metrics.voice_to_voice.observe(m.voice_to_voice_s)
        for stage, seconds in (m.stages_s or {}).items():
            if stage in STAGES:  # a label per known stage, whatever a worker sends
                metrics.turn_stage.labels(stage).observe(seconds)
        if m.llm_ttft_s is not None:
            metrics.llm_ttft.observe(m.llm_ttft_s)
        if m.tts_ttfa_s is not None:
            metrics.tts_ttfa.observe(m.tts_ttfa_s)
        if m.response_done:
            metrics.responses.inc()
            self.record.turns += 1
        if m.interrupted:
            metrics.interruptions.inc()
        if m.unit_wall_clock_s is not None:
            metrics.duplex_units.labels("speak" if m.unit_spoke else "listen").observe(m.unit_wall_clock_s)
            if m.unit_lagging:
                metrics.duplex_lagging.inc()
        for part, busy, audio in (("asr", m.asr_busy_s, m.asr_audio_s), ("tts", m.tts_busy_s, m.tts_audio_s)):
            if audio:
                metrics.voice_busy.labels(part).inc(busy)
                metrics.voice_audio.labels(part).inc(audio)
