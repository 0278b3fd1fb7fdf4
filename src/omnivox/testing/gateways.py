"""Several gateways sharing one Redis store, and workers that register with them: real processes on
loopback ports, for the scale-out tests and benchmarks. A gateway can be killed (``kill -9``),
paused (``SIGSTOP``) and resumed, or restarted; the store restarted empty."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from omnivox.testing.cluster import free_port, spawn, wait_for_health
from omnivox.testing.redis_server import RedisServer, redis_server


@dataclass
class Gateway:
    name: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def health(self) -> dict[str, Any]:
        return httpx.get(self.url + "/health", timeout=2).json()


@dataclass
class GatewayCluster:
    redis: RedisServer
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    gateways: list[Gateway] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_urls: list[str] = field(default_factory=list)
    store_url: str | None = None  # how gateways reach the store (default: ``redis.url``)

    def _log(self, name: str) -> Path | None:
        return self.log_dir / f"{name}.log" if self.log_dir else None

    def start_gateway(self, gateway: Gateway | None = None, **env: str) -> Gateway:
        """Start a new gateway (or start ``gateway`` again, on its port) on the shared store."""
        if gateway is None:
            gateway = Gateway(f"gateway{len(self.gateways)}")
            self.gateways.append(gateway)
        store = {"OMNIVOX_STORE_URL": self.store_url or self.redis.url, "OMNIVOX_ADVERTISE_URL": gateway.url}
        args = ["gateway", "--port", str(gateway.port)]
        gateway.proc = spawn(args, {**store, **self.env, **env}, self._log(gateway.name))
        self.wait(gateway, lambda h: h["status"] in ("ok", "degraded"))
        return gateway

    def add_worker(
        self, gateways: Sequence[Gateway] | None = None, engine: str = "echo", seats: int = 1, **env: str
    ) -> subprocess.Popen[bytes]:
        """A worker process registering with ``gateways`` (all of them by default; the next on
        failure); with ``seats`` > 1, each of its seats registers as a worker of its own."""
        urls = ",".join(g.url for g in (gateways or self.gateways))
        port = free_port()
        args = ["worker", "--gateway", urls, "--port", str(port), "--engine", engine]
        args += ["--seats", str(seats)] if seats > 1 else []
        proc = spawn(args, {**self.env, **env}, self._log(f"worker{len(self.workers)}"))
        self.workers.append(proc)
        base = f"http://127.0.0.1:{port}"
        self.worker_urls += [f"{base}/seats/{i}" for i in range(seats)] if seats > 1 else [base]
        return proc

    def kill(self, gateway: Gateway) -> None:
        """``kill -9``: no goodbye, its lease runs out."""
        assert gateway.proc is not None
        gateway.proc.kill()
        gateway.proc.wait(10)

    def pause(self, gateway: Gateway) -> None:
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGSTOP)

    def resume(self, gateway: Gateway) -> None:
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGCONT)

    def wait(
        self, gateway: Gateway, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0
    ) -> dict:
        return wait_for_health(gateway.health, predicate, timeout, f"{gateway.name} did not get there")

    def wait_idle(self, n: int, timeout: float = 60.0) -> None:
        for gateway in self.live():
            self.wait(gateway, lambda h: h.get("workers_idle", 0) >= n, timeout)

    def live(self) -> list[Gateway]:
        return [g for g in self.gateways if g.proc is not None and g.proc.poll() is None]

    def stop(self) -> None:
        procs = [*self.workers, *(g.proc for g in self.gateways if g.proc is not None)]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a paused process cannot stop
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@contextlib.contextmanager
def gateway_cluster(
    gateways: int = 2,
    workers: int = 1,
    log_dir: Path | None = None,
    env: dict[str, str] | None = None,
    **more_env: str,
) -> Iterator[GatewayCluster]:
    """A redis-server, ``gateways`` gateways on it and ``workers`` echo workers registering with all
    of them; everything stopped at the end."""
    with redis_server() as redis:
        c = GatewayCluster(redis, env={**(env or {}), **more_env}, log_dir=log_dir)
        try:
            for _ in range(gateways):
                c.start_gateway()
            for _ in range(workers):
                c.add_worker()
            if workers:
                c.wait_idle(workers)
            yield c
        finally:
            c.stop()
