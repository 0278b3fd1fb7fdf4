"""Logging set-up for the command line entry points (libraries only call ``getLogger``)."""

from __future__ import annotations

import logging


def configure(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # one line per health check and heartbeat would drown everything else
    logging.getLogger("httpx").setLevel(logging.WARNING)
