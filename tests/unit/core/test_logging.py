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
