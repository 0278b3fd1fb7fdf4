"""Logging set-up for the command line entry points (libraries only call ``getLogger``).

Keys never reach a log: omnivox never takes one in a query string, and a client that puts one there
anyway (``?api_key=...``) has it blanked in the access log.
"""

from __future__ import annotations

import logging
import re

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
_ROUTINE_PATHS = ("/health", "/api/workers/register", "/metrics", "/api/pipeline")


class QuietRoutine(logging.Filter):
    """Lower uvicorn's access-log lines for routine paths to DEBUG (dropped unless that is on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn.access: (client, method, path with query, http version, status)
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            if args[2].split("?", 1)[0] in _ROUTINE_PATHS:
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


# Libraries that log a peer's malformed input with a traceback (aiosipua: a SIP datagram it cannot
# parse). A stranger's bad bytes are not our fault: one line says what came from whom.
_PEER_INPUT_LOGGERS = ("aiosipua.transport",)


class OneLineForPeerInput(logging.Filter):
    """A warning about what a peer sent keeps its exception's message, not its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.WARNING and record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def configure(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # one line per health check and heartbeat would drown everything else
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in _PEER_INPUT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLineForPeerInput) for f in logger.filters):
            logger.addFilter(OneLineForPeerInput())
    for name in ("uvicorn.access", "uvicorn.error", "omnivox"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, QuietRoutine) for f in access.filters):
        access.addFilter(QuietRoutine())
