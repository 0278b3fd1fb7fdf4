"""The agent's spans, exported to an in-memory OpenTelemetry SDK: a user turn with its speech, end of
turn and final transcript; a reply under it with its stages and what happened to it; errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from omnivox.agent import traces as agent_traces
from omnivox.agent.breakdown import StageTimes
from omnivox.agent.events import (
    Failure,
    ReplyCut,
    ReplyEnded,
    ReplyFigures,
    ReplyPaused,
    ReplyState,
    SpeechStarted,
    SpeechStopped,
    UserTurn,
)
from omnivox.agent.traces import AgentTraces, turn_detection
from omnivox.agent.turns import TurnSettings
from omnivox.core.errors import EngineFailure
from omnivox.voice.vad.turn import TurnParams


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def exported(monkeypatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(agent_traces, "tracer", lambda: provider.get_tracer("test"))
    monkeypatch.setattr(agent_traces, "tracing_on", lambda: True)
    return exporter


def test_a_turn_and_the_reply_that_answered_it_then_was_cut(exported) -> None:
    clock = Clock(47.5)
    traces = AgentTraces(model="smollm2", mode=lambda: "server_vad", clock=clock)
    seen: list = []
    emit = traces.observe(seen.append)
    emit(SpeechStarted("turn_1", 1000.0))  # heard at 47.5
    clock.now = 49.1
    emit(SpeechStopped("turn_1", 2500.0))
    times = StageTimes(speech_end=49.0, noticed=49.05, decided=49.5, transcribed=49.6)
    clock.now = 49.6
    traces.user_turn(UserTurn("turn_1", "hello there"), times)
    figures = ReplyFigures(llm_ttft_s=0.3, voice_to_voice_s=0.9, reason="turn_detected")
    figures.times = StageTimes(49.0, 49.05, 49.5, 49.6, 49.7, 49.8, 49.88, 49.9)
    clock.now = 50.5
    emit(ReplyPaused("reply_1", 400.0))
    clock.now = 50.7
    emit(ReplyEnded("reply_1", ReplyState.CANCELLED, figures, "Hi you", "Hi", 400.0))
    reply = SimpleNamespace(
        reply_id="reply_1",
        figures=figures,
        state=ReplyState.CANCELLED,
        plan=SimpleNamespace(speech_end_at=49.0, request=SimpleNamespace(voice="alba")),
    )
    clock.now = 51.0
    traces.reply_over(reply)  # type: ignore[arg-type]
    assert len(seen) == 4  # every event went on to the adapter

    spans = {s.name: s for s in exported.get_finished_spans()}
    turn = spans["user_turn"]
    for child in ("speech", "end_of_turn", "asr.final"):
        assert spans[child].parent.span_id == turn.context.span_id
    speech, wait, final = spans["speech"], spans["end_of_turn"], spans["asr.final"]
    assert turn.start_time == speech.start_time <= speech.end_time == wait.start_time
    assert wait.end_time == final.start_time <= final.end_time == turn.end_time
    assert speech.end_time - speech.start_time == pytest.approx(1.5e9, rel=1e-3)  # 1.5 s of speech
    assert wait.attributes["omnivox.turn_detection"] == "server_vad"
    assert wait.attributes["omnivox.noticed_ms"] == pytest.approx(50.0)

    answer = spans["reply"]
    assert answer.parent.span_id == turn.context.span_id  # the reply answers that turn
    assert answer.attributes["omnivox.llm"] == "smollm2" and answer.attributes["omnivox.voice"] == "alba"
    assert answer.attributes["omnivox.state"] == "cancelled"
    names = [e.name for e in answer.events]
    assert names == [
        "llm.first_token",
        "first_words",
        "tts.first_audio",
        "first_audio_sent",
        "paused",
        "barge_in",
        "cut",
    ]
    assert [e.attributes.get("omnivox.decision") for e in answer.events if e.name == "barge_in"] == ["cut"]
    # it began when the LLM was asked: 0.3 s before its first token
    assert answer.events[0].timestamp - answer.start_time == pytest.approx(0.3e9, rel=1e-3)


def test_a_failure_the_agent_went_on_after_is_an_error_span(exported) -> None:
    traces = AgentTraces(model="m", mode=lambda: "manual", clock=Clock(1.0))
    traces.observe(lambda e: None)(Failure(EngineFailure("the ASR stage is gone")))
    (span,) = exported.get_finished_spans()
    assert span.name == "error" and span.status.status_code is StatusCode.ERROR
    assert span.attributes["omnivox.error.code"] == EngineFailure.code


def test_a_barge_in_on_a_finished_reply_still_playing_is_a_span_of_its_own(exported) -> None:
    traces = AgentTraces(model="m", mode=lambda: "server_vad", clock=Clock(1.0))
    traces.observe(lambda e: None)(ReplyCut("reply_9", 1200.0))
    (span,) = exported.get_finished_spans()
    assert span.name == "barge_in" and span.attributes["omnivox.decision"] == "cut"
    assert span.attributes["omnivox.reply_id"] == "reply_9"


def test_tracing_off_leaves_the_events_alone_and_makes_no_span() -> None:
    traces = AgentTraces(model="m", mode=lambda: "manual")
    emit = print
    assert traces.observe(emit) is emit
    traces.user_turn(UserTurn("t", "x"), StageTimes(1.0, transcribed=1.2))  # nothing to do


def test_the_turn_detection_mode_names() -> None:
    assert turn_detection(None) == "manual"
    assert turn_detection(TurnSettings()) == "server_vad"
    assert turn_detection(TurnSettings(TurnParams(eagerness="high"))) == "semantic_vad:high"
