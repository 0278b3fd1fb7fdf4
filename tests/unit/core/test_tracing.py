"""Tracing: off by default, where spans go when it is on, and trace context as W3C traceparent."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from omnivox.core import tracing
from omnivox.core.tracing import (
    child_span,
    configure_tracing,
    context_from,
    endpoint,
    traceparent,
    traceparent_of,
    tracer,
    tracing_on,
)


def test_tracing_is_off_unless_an_endpoint_is_set_or_the_standard_variables_name_one() -> None:
    assert endpoint(None, env={}) is None
    assert endpoint("http://collector:4318", env={}) == "http://collector:4318"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}
    assert endpoint(None, env=env) == "http://a:4318"
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://b:4318/v1/traces"
    assert endpoint(None, env=env) == "http://b:4318/v1/traces"  # the traces-only one wins
    stop = configure_tracing("gateway", None)
    stop()  # off: nothing to flush, nothing raised


def test_no_span_no_traceparent_and_garbage_is_no_parent() -> None:
    assert traceparent() is None  # no span is recording
    assert context_from(None) is None and context_from("00-not-a-trace") is None


def test_a_traceparent_carries_the_trace_to_the_next_process() -> None:
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("gateway") as span:
        sent = traceparent()
    assert sent is not None and sent.startswith("00-")
    parent = context_from(sent)
    assert parent is not None
    with provider.get_tracer("t").start_as_current_span("worker", context=parent) as child:
        assert child.get_span_context().trace_id == span.get_span_context().trace_id
        assert child.parent is not None and child.parent.span_id == span.get_span_context().span_id
    assert isinstance(tracer(), trace.Tracer)


def test_a_pipeline_request_span_continues_its_senders_and_hands_its_own_on(monkeypatch) -> None:
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("worker.session") as worker:
        sent = traceparent()
    assert sent is not None
    assert not tracing_on() and child_span("pipeline.request", sent, {}) is None  # off: nothing made
    monkeypatch.setattr(tracing, "_on", True)
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("t"))
    assert child_span("pipeline.request", "", {}) is None  # nobody to continue
    request = child_span("pipeline.request", sent, {"omnivox.request_id": "r1"})
    assert request is not None
    assert request.parent is not None and request.parent.span_id == worker.get_span_context().span_id
    stage = child_span("stage.llm", traceparent_of(request), {})
    assert stage is not None and stage.parent is not None
    assert stage.parent.span_id == request.get_span_context().span_id
    assert stage.get_span_context().trace_id == worker.get_span_context().trace_id  # one trace
    assert traceparent_of(None) == ""
