"""``omnivox serve --pipeline SPEC`` as a real process for integration tests: the gateway, its light
workers, the coordinator and every stage in processes of their own. Echo LLM (the reply says what
was heard), Whisper and hibari on the stages; no keys (loopback), so ``AUTH`` is not checked."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from omnivox.testing.cluster import FAST, free_port

KEY = "secret"
AUTH = {"Authorization": f"Bearer {KEY}"}


class Served:
    def __init__(
        self,
        log_dir: Path,
        spec: str = "cascade",
        workers: int = 2,
        env: dict[str, str] | None = None,
        seats: int = 1,
    ) -> None:
        self.port = free_port()
        self.workers = workers * seats  # each seat of a worker process is a worker to the gateway
        full = {**os.environ, **FAST, "OMNIVOX_LLM": "echo", "OMNIVOX_ASR": "whisper", **(env or {})}
        full["OMNIVOX_PIPELINE_HEARTBEAT_S"] = "0.1"
        self.log = open(log_dir / "serve.log", "wb")  # closed in stop()
        cmd = [sys.executable, "-m", "omnivox", "serve", "--pipeline", spec, "--workers", str(workers)]
        cmd += ["--seats", str(seats)] if seats > 1 else []
        self.proc = subprocess.Popen(
            [*cmd, "--port", str(self.port)], env=full, stdout=self.log, stderr=subprocess.STDOUT
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def health(self) -> dict[str, Any]:
        return httpx.get(self.url + "/health", timeout=2).json()

    def stages(self) -> dict[str, Any]:
        return httpx.get(self.url + "/api/stages", headers=AUTH, timeout=2).json()

    def loads(self) -> dict[str, dict[str, float]]:
        return {s["name"]: s["load"] for s in self.stages()["stages"]}

    def wait(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                last = self.health()
                if predicate(last):
                    return last
            time.sleep(0.2)
        raise TimeoutError(f"not ready: {last}")

    def until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait for ``condition`` (what the gateway shows of the stages is up to ~1.5 s old)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the condition never held")
            time.sleep(0.1)

    def ready(self, h: dict[str, Any]) -> bool:
        pipeline = h.get("pipeline") or {}
        return h.get("workers_idle", 0) >= self.workers and pipeline.get("stages_alive") == pipeline.get(
            "stages", -1
        )

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
