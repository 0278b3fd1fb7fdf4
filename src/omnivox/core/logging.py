"""Logging set-up for the command line entry points (libraries only call ``getLogger``).

Keys never reach a log: omnivox never takes one in a query string, and a client that puts one there
anyway (``?api_key=...``) has it blanked in the access log.

``log_format = "json"`` writes one JSON object a line (``ts``, ``level``, ``logger``, ``message``,
``exception``), with the session the line belongs to (``session_id``, set where a session is served)
and the trace it is part of (``trace_id``, ``span_id``) when tracing is on, so a log search and a
trace meet. uvicorn's own lines go through the same handler either way.
"""

from __future__ import annotations

import json
import logging
import re
import time
from contextvars import ContextVar
from typing import Literal

from opentelemetry import trace

# the session being served in this task (and the tasks it starts): set by the gateway's client edge
# and the worker's session hosting
SESSION_ID: ContextVar[str | None] = ContextVar("omnivox_session_id", default=None)

LogFormat = Literal["text", "json"]

_SECRET_PARAM = re.compile(r"((?:api_?key|key|token|secret|password|authorization)=)[^&\s\"']*", re.I)


def redact(text: str) -> str:
    """``text`` with the values of secret-looking query parameters replaced by ``***``."""
    return _SECRET_PARAM.sub(r"\1***", text)


class RedactSecrets(logging.Filter):
    """Blank secret query parameters in a record's message and arguments (uvicorn's access log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


# The access log's routine lines: health polls, heartbeats and scrapes, every second or two per
# worker. They go at DEBUG (the log at INFO is for what happened to sessions).
_ROUTINE_PATHS = (
    "/health",
    "/api/workers/register",
    "/api/workers/register/seats",
    "/metrics",
    "/api/pipeline",
)
# a worker process with seats (``protocol.control.workers``) answers health under ``/seats/``:
# ``/seats/N/health`` for one seat, ``/seats/health`` for all
_SEAT_HEALTH = re.compile(r"/seats/(?:[0-9]+/)?health")


class QuietRoutine(logging.Filter):
    """Lower uvicorn's access-log lines for routine paths to DEBUG (dropped unless that is on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn.access: (client, method, path with query, http version, status)
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path = args[2].split("?", 1)[0]
            if path in _ROUTINE_PATHS or _SEAT_HEALTH.fullmatch(path):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


class JsonLines(logging.Formatter):
    """One JSON object per record, with the session and trace it belongs to."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (session := SESSION_ID.get()) is not None:
            out["session_id"] = session
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            out["trace_id"] = format(span.trace_id, "032x")
            out["span_id"] = format(span.span_id, "016x")
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(level: str = "INFO", log_format: LogFormat = "text") -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLines())
    # one line per health check and heartbeat would drown everything else
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in ("uvicorn.access", "uvicorn.error", "omnivox"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QuietRoutine) for f in access.filters):
        access.addFilter(QuietRoutine())
