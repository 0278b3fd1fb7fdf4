"""The gateway's metrics tap: a worker's reported figures become Prometheus metrics."""

from __future__ import annotations

from omnivox.connection.taps import Direction, Frame
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


def _tap() -> tuple[MetricsTap, GatewayMetrics, SessionRecord]:
    metrics, record = GatewayMetrics(), SessionRecord("streaming", "s", 0.0)
    return MetricsTap(metrics, record), metrics, record


def _value(metrics: GatewayMetrics, name: str, labels: dict[str, str] | None = None) -> float | None:
    return metrics.registry.get_sample_value(name, labels or {})


def test_a_streaming_turns_figures_count_the_turn_its_cache_and_its_ttft() -> None:
    tap, metrics, record = _tap()
    tap.apply(Metrics(cache_hit=True, ttft_s=0.2, ttft_cache="hit", turn_done=True))
    tap.apply(Metrics(cache_hit=False, ttft_s=0.5, turn_done=True))  # no cache label: a miss
    assert _value(metrics, "omnivox_cache_hits_total") == 1
    assert _value(metrics, "omnivox_cache_misses_total") == 1
    assert _value(metrics, "omnivox_time_to_first_token_seconds_count", {"cache": "hit"}) == 1
    assert _value(metrics, "omnivox_time_to_first_token_seconds_sum", {"cache": "miss"}) == 0.5
    assert _value(metrics, "omnivox_streaming_turns_total") == 2 and record.turns == 2


def test_a_report_with_nothing_in_it_counts_nothing() -> None:
    tap, metrics, record = _tap()
    tap.apply(Metrics())
    assert record.turns == 0
    for name in ("omnivox_cache_hits_total", "omnivox_cache_misses_total", "omnivox_streaming_turns_total"):
        assert _value(metrics, name) == 0
    assert _value(metrics, "omnivox_voice_busy_seconds_total", {"part": "asr"}) is None  # no audio: no label


def test_realtime_figures_errors_interruptions_and_real_time_factors() -> None:
    tap, metrics, record = _tap()
    tap.apply(
        Metrics(
            error_code="llm_failed",
            llm_ttft_s=0.3,
            tts_ttfa_s=0.4,
            response_done=True,
            interrupted=True,
            asr_busy_s=0.5,
            asr_audio_s=2.0,
            tts_busy_s=0.0,  # spoke nothing new: no tts figures
            tts_audio_s=0.0,
        )
    )
    assert _value(metrics, "omnivox_errors_total", {"code": "llm_failed"}) == 1
    assert _value(metrics, "omnivox_llm_time_to_first_token_seconds_sum") == 0.3
    assert _value(metrics, "omnivox_tts_time_to_first_audio_seconds_sum") == 0.4
    assert _value(metrics, "omnivox_realtime_responses_total") == 1 and record.turns == 1
    assert _value(metrics, "omnivox_realtime_interruptions_total") == 1
    assert _value(metrics, "omnivox_voice_busy_seconds_total", {"part": "asr"}) == 0.5
    assert _value(metrics, "omnivox_voice_audio_seconds_total", {"part": "asr"}) == 2.0
    assert _value(metrics, "omnivox_voice_audio_seconds_total", {"part": "tts"}) is None


def test_a_duplex_unit_is_labelled_by_what_it_did_and_lagging_is_counted() -> None:
    tap, metrics, _ = _tap()
    tap.apply(Metrics(unit_wall_clock_s=0.1, unit_spoke=True, unit_lagging=True))
    tap.apply(Metrics(unit_wall_clock_s=0.2))
    assert _value(metrics, "omnivox_duplex_unit_seconds_sum", {"decision": "speak"}) == 0.1
    assert _value(metrics, "omnivox_duplex_unit_seconds_sum", {"decision": "listen"}) == 0.2
    assert _value(metrics, "omnivox_duplex_lagging_units_total") == 1
    tap.apply(Metrics(unit_lagging=True))  # lagging without a unit's time is no unit
    assert _value(metrics, "omnivox_duplex_lagging_units_total") == 1


async def test_only_internal_text_frames_that_are_metrics_are_seen() -> None:
    tap, metrics, record = _tap()
    report = Metrics(turn_done=True).model_dump_json()
    await tap.see(Frame(Direction.TO_CLIENT, 0.0, report))  # not taken out of the stream: the client's
    await tap.see(Frame(Direction.TO_CLIENT, 0.0, report.encode(), internal=True))  # binary
    await tap.see(Frame(Direction.TO_CLIENT, 0.0, '{"type": "omnivox.internal.newer"}', internal=True))
    await tap.see(Frame(Direction.TO_CLIENT, 0.0, "not json", internal=True))
    assert record.turns == 0
    await tap.see(Frame(Direction.TO_CLIENT, 0.0, report, internal=True))
    assert record.turns == 1 and _value(metrics, "omnivox_streaming_turns_total") == 1
