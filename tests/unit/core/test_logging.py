"""Secrets in query strings are blanked in every log line."""

from __future__ import annotations

import logging

from omnivox.core.logging import RedactSecrets, configure, redact


def test_secret_query_parameters_are_blanked() -> None:
    assert redact("GET /x?api_key=abc&b=1") == "GET /x?api_key=***&b=1"
    assert redact('"WebSocket /ws/s?token=t1" 403') == '"WebSocket /ws/s?token=***" 403'
    assert redact("/a?apikey=1&Key=2&password=3") == "/a?apikey=***&Key=***&password=***"
    assert redact("/plain?voice=alloy") == "/plain?voice=alloy"


def test_the_filter_blanks_arguments_of_access_log_records() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s"', ("1.2.3.4", "GET", "/x?api_key=s3"), None
    )
    RedactSecrets().filter(record)
    assert "s3" not in record.getMessage() and "api_key=***" in record.getMessage()


def test_configure_installs_the_filter_once() -> None:
    configure("WARNING")
    configure("WARNING")
    filters = logging.getLogger("uvicorn.access").filters
    assert sum(isinstance(f, RedactSecrets) for f in filters) == 1


def _access(path: str) -> logging.LogRecord:
    args = ("127.0.0.1:5000", "GET", path, "1.1", 200)
    return logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)


def test_health_polls_and_heartbeats_are_not_logged_at_info_but_sessions_are() -> None:
    from omnivox.core.logging import QuietRoutine

    quiet = QuietRoutine()
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    routines = ("/health", "/api/workers/register", "/api/workers/register/seats", "/metrics?x=1")
    for routine in (*routines, "/seats/3/health", "/seats/health"):
        record = _access(routine)
        assert quiet.filter(record) is False and record.levelname == "DEBUG"
    for path in ("/v1/realtime/calls", "/seats/3/ws/realtime/s", "/seats/x/health"):
        kept = _access(path)
        assert quiet.filter(kept) is True and kept.levelname == "INFO"
    logging.getLogger("uvicorn.access").setLevel(logging.DEBUG)
    assert quiet.filter(_access("/health")) is True  # at DEBUG they are shown
    logging.getLogger("uvicorn.access").setLevel(logging.NOTSET)


def test_json_lines_carry_the_session_and_the_trace_they_belong_to() -> None:
    import json

    from opentelemetry.sdk.trace import TracerProvider

    from omnivox.core.logging import SESSION_ID, JsonLines

    record = logging.LogRecord("omnivox.x", logging.WARNING, "", 0, "worker %s lost", ("w1",), None)
    plain = json.loads(JsonLines().format(record))
    assert plain["message"] == "worker w1 lost" and plain["level"] == "WARNING"
    assert "session_id" not in plain and "trace_id" not in plain
    token = SESSION_ID.set("s-42")
    try:
        with TracerProvider().get_tracer("t").start_as_current_span("session") as span:
            line = json.loads(JsonLines().format(record))
    finally:
        SESSION_ID.reset(token)
    assert line["session_id"] == "s-42"
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["ts"].endswith("Z") and line["logger"] == "omnivox.x"
