"""A real OTLP/HTTP trace receiver for tests: POST /v1/traces, protobuf decoded, spans kept.

It decodes what the OpenTelemetry exporters really send (``ExportTraceServiceRequest``), so a test
sees the spans as a collector would: their names, ids, parents, attributes and ``service.name``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from omnivox.testing.cluster import free_port


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    start_ns: int
    end_ns: int
    attributes: dict = field(default_factory=dict)
    events: tuple[str, ...] = ()  # the span's events' names, in order


def _value(v) -> object:  # an AnyValue
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the name http.server calls
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._take(request)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _take(self, request: ExportTraceServiceRequest) -> None:
        got = []
        for rs in request.resource_spans:
            attrs = {a.key: _value(a.value) for a in rs.resource.attributes}
            service = str(attrs.get("service.name", ""))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        ReceivedSpan(
                            service,
                            s.name,
                            s.trace_id.hex(),
                            s.span_id.hex(),
                            s.parent_span_id.hex(),
                            s.start_time_unix_nano,
                            s.end_time_unix_nano,
                            {a.key: _value(a.value) for a in s.attributes},
                            tuple(e.name for e in s.events),
                        )
                    )
        with self._lock:
            self.spans.extend(got)

    def wait_for(self, predicate, timeout: float = 20.0) -> list[ReceivedSpan]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            time.sleep(0.05)
        raise TimeoutError(f"spans never matched: {[(s.service, s.name) for s in spans]}")
