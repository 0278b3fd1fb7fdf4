"""Logging set-up for the command line entry points (libraries only call ``getLogger``)."""

from __future__ import annotations

import logging


def configure(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
