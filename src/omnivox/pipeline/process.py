"""Pipeline processes: a stage (``omnivox stage``) and the coordinator (``omnivox coordinator``), which
can also start the spec's local stages as child processes and restart them when they die.

Stages started by the coordinator are ``python -m omnivox stage NAME`` processes, exactly what one
runs by hand on another machine, so a local stage and a remote one are reached the same way. The
coordinator reports its view (stages, their load, requests) to a gateway, when given one, by posting
it to ``/api/pipeline`` with the worker key, as workers register: the gateway never imports the
pipeline.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from omnivox.core.keys import bearer
from omnivox.pipeline.connections import ConnectionLimits
from omnivox.pipeline.coordinator import Coordinator
from omnivox.pipeline.relay import PayloadRelay
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.spec import PipelineSpec, StageSpec
from omnivox.pipeline.stage import Stage

log = logging.getLogger(__name__)

BuildScheduler = Callable[[StageSpec], Scheduler]


def _on_signals(stop: Callable[[], None]) -> None:
    def handler(signum: int, frame: Any) -> None:
        stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread (tests)
            signal.signal(sig, handler)


def die_with_parent() -> None:
    """In a child: the kernel ends it when its parent dies (Linux), however the parent ends."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_stage(
    spec: PipelineSpec,
    name: str,
    coordinator: str,
    build: BuildScheduler,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    advertise: str | None = None,
    heartbeat_s: float = 0.2,
    relay: PayloadRelay | None = None,
    key: str | None = None,
    connections: ConnectionLimits | None = None,
) -> None:
    """Load the stage's model (its scheduler) and serve until told to stop (SIGTERM, Shutdown)."""
    began = time.monotonic()
    scheduler = build(spec.stage(name))
    stage = Stage(
        name,
        scheduler,
        coordinator,
        host=host,
        port=port,
        advertise=advertise,
        heartbeat_s=heartbeat_s,
        relay=relay,
        key=key,
        connections=connections,
    )
    _on_signals(stage.stop)
    log.info("stage %s ready in %.1f s at %s", name, time.monotonic() - began, stage.address)
    stage.run()


class LocalStages:
    """The spec's ``placement = "local"`` stages as child processes, restarted when they exit (at
    once after a long life; a stage that keeps dying young waits longer each time, up to 30 s)."""

    def __init__(
        self,
        command: Callable[[str], list[str]],
        names: list[str],
        restart_delay_s: float = 0.5,
        env: dict[str, str] | None = None,
    ):
        self.command = command
        self.env = env or {}  # besides this process's own (the key, when it came on the command line)
        self.names = names
        self.restart_delay_s = restart_delay_s
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.restarts: dict[str, int] = dict.fromkeys(names, 0)
        self._started: dict[str, float] = {}
        self._delay: dict[str, float] = dict.fromkeys(names, restart_delay_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="local-stages", daemon=True)

    def start(self) -> None:
        for name in self.names:
            self._spawn(name)
        self._thread.start()

    def _spawn(self, name: str) -> None:
        self._started[name] = time.monotonic()
        self.procs[name] = subprocess.Popen(
            self.command(name), env={**os.environ, **self.env}, preexec_fn=die_with_parent
        )
        log.info("local stage %s started (pid %d)", name, self.procs[name].pid)

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            for name, proc in list(self.procs.items()):
                if proc.poll() is not None and not self._stop.is_set():
                    lived = time.monotonic() - self._started[name]
                    delay = self.restart_delay_s if lived > 10 else min(30.0, self._delay[name] * 2)
                    self._delay[name] = delay
                    log.warning(
                        "local stage %s exited with %s; restarting in %.1f s", name, proc.returncode, delay
                    )
                    self.restarts[name] += 1
                    if self._stop.wait(delay):
                        return
                    self._spawn(name)

    def stop(self) -> None:
        self._stop.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def report_loop(
    coordinator: Coordinator, gateway_url: str, key: str | None, stop: threading.Event, every_s: float = 1.0
) -> None:
    """Post the coordinator's view to the gateway until ``stop``."""
    with httpx.Client(base_url=gateway_url.rstrip("/"), timeout=3.0, headers=bearer(key)) as http:
        while not stop.wait(every_s):
            if not coordinator.snapshot:
                continue
            try:
                http.post("/api/pipeline", json=coordinator.snapshot).raise_for_status()
            except httpx.HTTPError as exc:
                log.debug("gateway %s did not take the pipeline report: %s", gateway_url, exc)


def stage_command(spec_ref: str, address: str, extra: list[str] | None = None) -> Callable[[str], list[str]]:
    """The command line that runs stage NAME of ``spec_ref`` against the coordinator at ``address``."""

    def command(name: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "omnivox",
            "stage",
            name,
            "--pipeline",
            spec_ref,
            "--coordinator",
            address,
            *(extra or []),
        ]

    return command


def run_coordinator(
    spec: PipelineSpec,
    spec_ref: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    local: bool = True,
    gateway_url: str | None = None,
    key: str | None = None,
    heartbeat_s: float = 0.2,
    lost_after_s: float = 3.0,
    relay: PayloadRelay | None = None,
    ready: Callable[[str], None] | None = None,
    connections: ConnectionLimits | None = None,
) -> None:
    """Serve as the coordinator; with ``local``, start (and keep) the spec's local stages too."""
    coordinator = Coordinator(
        spec,
        host=host,
        port=port,
        heartbeat_s=heartbeat_s,
        lost_after_s=lost_after_s,
        relay=relay,
        key=key,  # the worker key: the gateway's reports and the pipeline's own sockets
        connections=connections,
    )
    address = coordinator.address.replace("0.0.0.0", "127.0.0.1")
    stop = threading.Event()

    def halt() -> None:
        stop.set()
        coordinator.stop()

    _on_signals(halt)
    names = [s.name for s in spec.stages if s.placement == "local"] if local else []
    key_env = {"OMNIVOX_WORKER_KEY": key} if key else {}
    stages = LocalStages(stage_command(spec_ref, address), names, env=key_env)
    stages.start()
    if gateway_url:
        threading.Thread(
            target=report_loop, args=(coordinator, gateway_url, key, stop), name="report", daemon=True
        ).start()
    log.info("coordinator of pipeline %s at %s", spec.name, coordinator.address)
    if ready is not None:
        ready(coordinator.address)
    try:
        coordinator.run()
    finally:
        stop.set()
        stages.stop()
