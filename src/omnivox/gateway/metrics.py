"""Prometheus metrics of one gateway, on a registry of its own (no import-time globals)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.5, 5.0, 10.0)
_WAIT_BUCKETS = (0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sessions = Counter("omnivox_sessions", "Sessions started", ["kind"], registry=r)
        self.active_sessions = Gauge(
            "omnivox_active_sessions", "Sessions connected now", ["kind"], registry=r
        )
        self.turns = Counter("omnivox_streaming_turns", "Streaming turns served", registry=r)
        self.queue_length = Gauge("omnivox_queue_length", "Tickets waiting for a worker", registry=r)
        self.queue_wait = Histogram(
            "omnivox_queue_wait_seconds",
            "Time from enqueue to worker assignment",
            ["task_type"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.cache_hits = Counter(
            "omnivox_cache_hits", "Streaming turns routed to a worker holding their history", registry=r
        )
        self.cache_misses = Counter(
            "omnivox_cache_misses", "Streaming turns that prefilled from scratch", registry=r
        )
        self.ttft = Histogram(
            "omnivox_time_to_first_token_seconds",
            "generate sent to first chunk relayed",
            ["cache"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.voice_to_voice = Histogram(
            "omnivox_voice_to_voice_seconds",
            "Realtime: end of user speech to the first reply audio delta",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.turn_stage = Histogram(
            "omnivox_turn_stage_seconds",
            "Realtime: when a turn passed each stage (noticed, decided, transcribed, llm_first_token, "
            "first_words, tts_first_audio, first_audio_sent), after the end of the user's speech",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.llm_ttft = Histogram(
            "omnivox_llm_time_to_first_token_seconds",
            "Realtime: response start to the LLM's first token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tts_ttfa = Histogram(
            "omnivox_tts_time_to_first_audio_seconds",
            "Realtime: response start to its first audio",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.responses = Counter("omnivox_realtime_responses", "Realtime responses finished", registry=r)
        self.interruptions = Counter(
            "omnivox_realtime_interruptions", "Realtime responses cut short (barge-in or cancel)", registry=r
        )
        self.voice_busy = Counter(
            "omnivox_voice_busy_seconds",
            "Realtime: time spent hearing (asr) and speaking (tts)",
            ["part"],
            registry=r,
        )
        self.voice_audio = Counter(
            "omnivox_voice_audio_seconds",
            "Realtime: audio heard (asr) and spoken (tts)",
            ["part"],
            registry=r,
        )
        self.duplex_units = Histogram(
            "omnivox_duplex_unit_seconds",
            "Duplex: a unit's chunk arriving at the worker to its result sent",
            ["decision"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.duplex_lagging = Counter(
            "omnivox_duplex_lagging_units",
            "Duplex: units that heard several chunks at once (the unit loop fell behind)",
            registry=r,
        )
        self.recording_dropped = Counter(
            "omnivox_recording_dropped_frames",
            "Frames the session recorder could not keep up with (not recorded; the session went on)",
            registry=r,
        )
        self.recording_failures = Counter(
            "omnivox_recording_failures",
            "Sessions whose recording stopped on a write error (disk full, unwritable)",
            registry=r,
        )
        self.recordings_removed = Counter(
            "omnivox_recordings_removed", "Recordings removed by cleanup", ["reason"], registry=r
        )
        self.errors = Counter("omnivox_errors", "Errors reported to clients", ["code"], registry=r)
        self.workers = Gauge("omnivox_workers", "Workers by state", ["state"], registry=r)
        self.stages_alive = Gauge(
            "omnivox_pipeline_stages_alive", "Pipeline stages alive, as the coordinator last said", registry=r
        )
        self.stages = Gauge("omnivox_pipeline_stages", "Pipeline stages the coordinator runs", registry=r)
        self.slots_used = Gauge(
            "omnivox_pipeline_session_slots_used", "Voice sessions holding a pipeline slot", registry=r
        )
        self.slots = Gauge("omnivox_pipeline_session_slots", "Voice sessions the pipeline takes", registry=r)

    def error(self, code: str) -> None:
        self.errors.labels(code).inc()

    def render(self, refresh: Callable[[GatewayMetrics], None] | None = None) -> bytes:
        if refresh is not None:
            refresh(self)
        return generate_latest(self.registry)
