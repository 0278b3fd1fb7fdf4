"""Real gateway and worker processes on free loopback ports, for benchmarks and integration tests."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# servers listen below the kernel's ephemeral range (Linux: 32768-60999 by default): a port the kernel
# handed out and took back could be handed to any client's outgoing connection before the server
# binds it (an integration run under load lost a worker that way: "address already in use")
_LISTEN_PORTS = range(20000, 32768)


def free_port() -> int:
    """A loopback port free now, outside the ephemeral range (chosen at random: parallel test
    processes rarely meet, and a port taken is skipped)."""
    for _ in range(200):
        port = random.choice(_LISTEN_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free loopback port in {_LISTEN_PORTS.start}-{_LISTEN_PORTS.stop - 1}")


FAST = {
    "OMNIVOX_HEALTH_INTERVAL_S": "0.3",
    "OMNIVOX_HEARTBEAT_INTERVAL_S": "0.3",
    "OMNIVOX_QUEUE_UPDATE_INTERVAL_S": "1.0",
    "OMNIVOX_LOG_LEVEL": "WARNING",
}


def spawn(args: list[str], env: dict[str, str], log: Path | None = None) -> subprocess.Popen[bytes]:
    """``python -m omnivox ARGS`` with the fast test timings and ``env``; its output to ``log``."""
    # the child gets its own copy of the log's descriptor: this process's is closed at once
    with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
        return subprocess.Popen(
            [sys.executable, "-m", "omnivox", *args],
            env={**os.environ, **FAST, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_for_health(
    read: Callable[[], dict], predicate: Callable[[dict], bool], timeout: float, failing: str
) -> dict:
    """Poll ``read`` (a ``/health`` reply) until ``predicate`` holds; ``TimeoutError(failing: last)``
    after ``timeout`` seconds. A server not answering yet, or answering garbage, is polled again."""
    deadline = time.monotonic() + timeout
    last: dict | None = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            last = read()
            if predicate(last):
                return last
        time.sleep(0.1)
    raise TimeoutError(f"{failing}: {last}")


@dataclass
class Cluster:
    """A gateway process plus worker processes that register with it."""

    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    port: int = field(default_factory=free_port)
    gateway: subprocess.Popen[bytes] | None = None
    coordinator: subprocess.Popen[bytes] | None = None  # a staged pipeline's (it starts its stages)
    coordinator_url: str | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_urls: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _spawn(self, args: list[str], name: str, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
        return spawn(args, {**self.env, **extra_env}, self.log_dir / f"{name}.log" if self.log_dir else None)

    def spawn(self, args: list[str], name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """``omnivox ARGS`` with this cluster's settings (and ``env``), its output in ``{name}.log``
        (a process started again gets a log of its own name: the first one's is kept)."""
        return self._spawn(args, name, env or {})

    def start_gateway(self, **env: str) -> None:
        self.gateway = self._spawn(["gateway", "--port", str(self.port)], "gateway", env)
        self.wait(lambda h: h["status"] in ("ok", "degraded"))

    def start_pipeline(self, spec: str, timeout: float = 120.0, **env: str) -> None:
        """The coordinator of ``spec`` with its local stages, reporting to this gateway; workers
        added after this use it (engine ``pipeline``)."""
        port = free_port()
        self.coordinator_url = f"tcp://127.0.0.1:{port}"
        args = ["coordinator", "--pipeline", spec, "--port", str(port), "--gateway", self.url]
        self.coordinator = self._spawn(args, "coordinator", env)
        self.wait(
            lambda h: (p := h.get("pipeline")) is not None and p["stages_alive"] == p["stages"], timeout
        )

    def pipeline_view(self) -> dict:
        key = self.env.get("OMNIVOX_ADMIN_KEY") or self.env.get("OMNIVOX_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            return httpx.get(self.url + "/api/stages", headers=headers, timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def add_worker(self, engine: str = "echo", seats: int = 1, **env: str) -> subprocess.Popen[bytes]:
        """A worker process; with ``seats`` > 1 it hosts that many seats, each a worker of its own
        to the gateway (``worker_urls`` gets each seat's URL)."""
        if self.coordinator_url is not None:
            engine, env = "pipeline", {"OMNIVOX_COORDINATOR": self.coordinator_url, **env}
        port = free_port()
        args = ["worker", "--gateway", self.url, "--port", str(port), "--engine", engine]
        proc = self._spawn(
            args + (["--seats", str(seats)] if seats > 1 else []), f"worker{len(self.workers)}", env
        )
        self.workers.append(proc)
        base = f"http://127.0.0.1:{port}"
        self.worker_urls += [f"{base}/seats/{i}" for i in range(seats)] if seats > 1 else [base]
        return proc

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the gateway's ``/metrics`` (0 when it has none yet)."""
        key = self.env.get("OMNIVOX_ADMIN_KEY") or self.env.get("OMNIVOX_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
        for line in httpx.get(self.url + "/metrics", headers=headers, timeout=5).text.splitlines():
            if line.startswith(want + " "):
                return float(line.split()[-1])
        return 0.0

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=2).json()

    def workers_view(self) -> list[dict]:
        return httpx.get(self.url + "/api/workers", timeout=2).json()["workers"]

    def wait(self, predicate: Callable[[dict], bool], timeout: float = 60.0) -> dict:
        return wait_for_health(self.health, predicate, timeout, "cluster did not get ready")

    def wait_idle(self, n: int, timeout: float = 60.0) -> dict:
        return self.wait(lambda h: h["workers_idle"] >= n, timeout)

    def stop(self) -> None:
        for proc in [*self.workers, self.coordinator, self.gateway]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.workers, self.coordinator, self.gateway]:
            if proc is not None:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


@contextlib.contextmanager
def cluster(
    workers: int = 1,
    engine: str = "echo",
    log_dir: Path | None = None,
    pipeline: str | None = None,
    env: dict[str, str] | None = None,
    seats: int = 1,
    **more_env: str,
) -> Iterator[Cluster]:
    """A gateway and ``workers`` worker processes (of ``seats`` seats each); with ``pipeline`` (a
    spec), its coordinator and stages too, and the workers are light session hosts on them. ``env``
    and ``more_env`` (OMNIVOX_* settings) go to every process."""
    c = Cluster(env={**(env or {}), **more_env}, log_dir=log_dir)
    try:
        c.start_gateway()
        if pipeline:
            c.start_pipeline(pipeline)
        for _ in range(workers):
            c.add_worker(engine, seats=seats)
        if workers:
            c.wait_idle(workers * seats)
        yield c
    finally:
        c.stop()
