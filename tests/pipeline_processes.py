"""Pipeline processes for integration tests: ``omnivox coordinator`` / ``stage`` as real processes, and
one request through a running pipeline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from omnivox.pipeline.client import PipelineClient


def omnivox(*args: str, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    out = open(log, "wb") if log else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "omnivox", *args],
        env={**os.environ, "OMNIVOX_LOG_LEVEL": "INFO", "OMNIVOX_PIPELINE_HEARTBEAT_S": "0.1", **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


def through(client: PipelineClient) -> dict:
    request = client.submit({"n": 7})
    while True:
        event = request.next(30)
        assert event is not None
        if event.kind == "result":
            return event.values
