"""The staged pipeline's own overhead: requests through three no-op stages (spec ``noop``).

A request is six control messages (client -> coordinator -> a -> b -> c -> coordinator -> client);
each stage hands it to its scheduler's thread and back. Two placements:

- ``threads``: the coordinator and the stages on threads of this process (sockets on loopback);
- ``processes``: ``omnivox coordinator --pipeline noop`` as its own process, starting each stage as
  a process of its own, as in a deployment (same host: arrays go through shared memory);
- ``frames``: the same processes with shared memory off, so arrays travel as ZeroMQ frames, as they
  do between hosts (over loopback here: the network's own cost is not in it).

With ``--key on`` every socket speaks CurveZMQ (as a pipeline with the worker key does: ``serve
--pipeline`` always has one). Latency is one request at a time (p50 / p99); throughput keeps
``--inflight`` requests in flight and counts requests and control messages per second.
``--audio-ms`` adds that much 16 kHz float32 audio to each request (0: an empty payload).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from omnivox.bench.table import percentile, print_table, write_json
from omnivox.pipeline.builtin import build_builtin
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.coordinator import Coordinator
from omnivox.pipeline.relay import PayloadRelay
from omnivox.pipeline.scheduler import Scheduler
from omnivox.pipeline.spec import StageSpec, load_spec
from omnivox.pipeline.stage import Stage
from omnivox.testing.cluster import free_port

MESSAGES_PER_REQUEST = 6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--placement", nargs="+", default=["threads", "processes", "frames"], help="threads processes frames"
    )
    parser.add_argument("--requests", type=int, default=500, help="sequential requests for the latency")
    parser.add_argument("--inflight", type=int, default=64, help="requests kept in flight for the throughput")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the throughput runs")
    parser.add_argument("--audio-ms", type=int, nargs="+", default=[0, 1000], help="audio per request (ms)")
    parser.add_argument(
        "--key", nargs="+", choices=["off", "on"], default=["off"], help="CurveZMQ (worker key), a run each"
    )


KEY = "bench-pipeline-key"


def _builtin(spec: StageSpec) -> Scheduler:
    scheduler = build_builtin(spec)
    if scheduler is None:
        raise ValueError(f"{spec.model} is not a builtin model")
    return scheduler


@contextmanager
def threads(key: str | None = None) -> Iterator[str]:
    spec = load_spec("noop")
    coordinator = Coordinator(spec, key=key)
    stages = [Stage(s.name, _builtin(s), coordinator.address, key=key) for s in spec.stages]
    parts: list[Coordinator | Stage] = [coordinator, *stages]
    runners = [threading.Thread(target=x.run, daemon=True) for x in parts]
    for t in runners:
        t.start()
    try:
        yield coordinator.address
    finally:
        for x in reversed(parts):
            x.stop()
        for t in runners:
            t.join(5)


@contextmanager
def processes(key: str | None = None, shared_memory: bool = True) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "omnivox", "coordinator", "--pipeline", "noop", "--port", str(port)]
    env = {**os.environ, "OMNIVOX_RELAY_SHARED_MEMORY": "true" if shared_memory else "false"}
    env.pop("OMNIVOX_API_KEY", None)
    if key:
        env["OMNIVOX_WORKER_KEY"] = key
    else:
        env.pop("OMNIVOX_WORKER_KEY", None)
    proc = subprocess.Popen([*cmd, "--log-level", "WARNING"], env=env)
    try:
        yield f"tcp://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def frames(key: str | None = None) -> Iterator[str]:
    with processes(key, shared_memory=False) as address:
        yield address


PLACEMENTS = {"threads": threads, "processes": processes, "frames": frames}


def _ready(client: PipelineClient) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.ready.is_set() and {"a", "b", "c"} <= set(client.stages):
            return
        time.sleep(0.05)
    raise TimeoutError("the noop pipeline did not come up")


def _one(client: PipelineClient, values: dict) -> None:
    request = client.submit(values)
    while request.next(30) is not None and not request.finished:
        pass


def measure(
    address: str, audio_ms: int, args: argparse.Namespace, shm: bool = True, key: str | None = None
) -> dict[str, float]:
    client = PipelineClient(address, name="bench", relay=PayloadRelay(use_shm=shm), key=key)
    try:
        _ready(client)
        values: dict[str, Any] = {"n": 1}
        if audio_ms:
            values["audio"] = np.zeros(16 * audio_ms, np.float32)
        for _ in range(50):  # warm up: connections, page faults
            _one(client, values)
        latencies = []
        for _ in range(args.requests):
            began = time.perf_counter()
            _one(client, values)
            latencies.append(time.perf_counter() - began)
        done, began = 0, time.perf_counter()
        while time.perf_counter() - began < args.seconds:
            batch = [client.submit(values) for _ in range(args.inflight)]
            for request in batch:
                while request.next(30) is not None and not request.finished:
                    pass
            done += len(batch)
        rate = done / (time.perf_counter() - began)
    finally:
        client.close()
    return {
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "requests_per_s": rate,
        "messages_per_s": rate * MESSAGES_PER_REQUEST,
    }


def run(args: argparse.Namespace) -> int:
    rows, results = [], {}
    for placement in args.placement:
        for curve in args.key:
            key = KEY if curve == "on" else None
            with PLACEMENTS[placement](key) as address:
                for audio_ms in args.audio_ms:
                    r = measure(address, audio_ms, args, shm=placement != "frames", key=key)
                    results[f"{placement}/{audio_ms}ms" + ("/key" if key else "")] = r
                    row = [r["p50_ms"], r["p99_ms"], r["requests_per_s"], r["messages_per_s"]]
                    rows.append([placement, curve, audio_ms, *row])
    print_table(
        f"Pipeline overhead: three no-op stages, {args.requests} sequential requests, "
        f"{args.inflight} in flight for {args.seconds:.0f} s",
        ["placement", "key", "audio ms", "p50 ms", "p99 ms", "requests/s", "messages/s"],
        rows,
    )
    write_json(args.json, {"pipeline": results})
    return 0
