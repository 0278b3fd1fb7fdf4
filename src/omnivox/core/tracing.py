"""OpenTelemetry traces: off unless an OTLP endpoint is configured, one trace per session across processes.

Configured by ``--otlp-endpoint`` (``OMNIVOX_OTLP_ENDPOINT``) or the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf``, the default, or ``grpc``). Every process has its
role as ``service.name`` (``omnivox-gateway``, ``omnivox-worker``, ``omnivox-stage-asr`` ...);
``omnivox serve`` passes the settings and the environment to the processes it starts, so they
trace too. Spans are exported in batches and flushed when the process stops.

Off, the tracer is OpenTelemetry's no-op one: starting a span costs a function call and nothing is
kept. Code everywhere uses ``tracer()`` and the W3C ``traceparent`` helpers here; the SDK and the
exporters (the ``telemetry`` extra) are imported only when tracing is on.

Context crosses processes as a W3C ``traceparent`` string: from a client's WebSocket upgrade or HTTP
request to the gateway, from the gateway to its worker (a header on the worker connection), and
from a worker into the pipeline's requests.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()
_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


_on = False  # configure_tracing turned it on in this process


def tracer() -> trace.Tracer:
    return trace.get_tracer("omnivox")


def tracing_on() -> bool:
    """Whether this process exports spans (code that builds spans after the fact skips the work)."""
    return _on


def wall_ns(monotonic_s: float, now_monotonic: float, now_wall: float) -> int:
    """A ``time.monotonic`` moment as a span time (nanoseconds since the epoch)."""
    return int((monotonic_s - now_monotonic + now_wall) * 1e9)


def endpoint(configured: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """Where traces go: the setting, else the standard variables (None: tracing is off)."""
    if configured:
        return configured
    return next((env[v] for v in _ENDPOINT_VARS if env.get(v)), None)


def configure_tracing(role: str, configured_endpoint: str | None) -> Callable[[], None]:
    """Turn tracing on for this process (when an endpoint is configured); returns the function that
    flushes and stops it (a no-op when tracing is off)."""
    url = endpoint(configured_endpoint)
    if url is None:
        return lambda: None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise SystemExit(
            "omnivox: tracing is configured but the OpenTelemetry SDK is not installed: "
            "pip install 'omnivox[telemetry]'"
        ) from None
    global _on
    provider = TracerProvider(resource=Resource.create({"service.name": f"omnivox-{role}"}))
    provider.add_span_processor(BatchSpanProcessor(_exporter(url)))
    trace.set_tracer_provider(provider)
    _on = True
    log.info("tracing: spans of omnivox-%s go to %s", role, url)
    return provider.shutdown


def _exporter(url: str) -> Any:
    grpc = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") == "grpc"
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=url)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # the base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) is given the traces path, as the spec says
    if not os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") and not url.rstrip("/").endswith(
        "/v1/traces"
    ):
        url = url.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=url)


def traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` (None: no span is recording)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get(TRACEPARENT)


def child_span(name: str, parent: str, attributes: Mapping[str, str | int]) -> trace.Span | None:
    """A span under the remote parent a ``traceparent`` names, for work that hands its context on
    (a pipeline request); None while tracing is off or nothing names a parent. End it yourself."""
    ctx = context_from(parent) if _on else None
    if ctx is None:
        return None
    return tracer().start_span(name, context=ctx, attributes=dict(attributes))


def traceparent_of(span: trace.Span | None) -> str:
    """``span`` as a W3C ``traceparent`` ("" for none)."""
    if span is None:
        return ""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get(TRACEPARENT, "")


def context_from(value: str | None) -> otel_context.Context | None:
    """The remote parent a ``traceparent`` names (None: none, or one that does not parse)."""
    if not value:
        return None
    ctx = _PROPAGATOR.extract({TRACEPARENT: value})
    span = trace.get_current_span(ctx)
    return ctx if span.get_span_context().is_valid else None
