"""Gateway dispatch latency and memory with 1, 100, 1,000 and 10,000 queued tickets.

Two measurements:
- in process: the WorkerPool alone (enqueue cost, dispatch cost on release, the cost of computing
  every ticket's position and ETA, memory per queued ticket);
- over the wire: a real gateway process and an echo worker; N WebSocket clients wait in its queue,
  and we time from a worker's release (its holder's ``done``) to the head client's ``queue_done``,
  and read the gateway's resident memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import tracemalloc

import websockets
from websockets.asyncio.client import ClientConnection

from omnivox.bench.table import print_table, rss_mb, write_json
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.protocol.control.workers import Capabilities
from omnivox.testing.cluster import cluster

USER = [{"role": "user", "content": "hello"}]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000, 10000])
    parser.add_argument("--wire-sizes", type=int, nargs="+", default=[1, 100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=20, help="dispatches timed per size")


def in_process(n: int, repeats: int) -> dict[str, float]:
    async def go() -> dict[str, float]:
        pool = WorkerPool(max_queue_size=n + repeats + 10)
        w = pool.add_worker("http://bench")
        w.capabilities = Capabilities(streaming=True)
        pool.report_health(w, WorkerState.IDLE)
        pool.enqueue("streaming")  # takes the only worker
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        for _ in range(n):
            pool.enqueue("streaming", "h")
        enqueue_us = (time.perf_counter() - t0) / n * 1e6
        per_ticket = (tracemalloc.get_traced_memory()[0] - before) / n
        tracemalloc.stop()
        dispatch, snapshot = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            pool.release(w, cached_hash="h")  # dispatches the head ticket onto w
            dispatch.append((time.perf_counter() - t0) * 1e6)
            pool.enqueue("streaming", "h")  # keep the queue at n
            t0 = time.perf_counter()
            pool.snapshot()
            snapshot.append((time.perf_counter() - t0) * 1e3)
        return {
            "enqueue_us": enqueue_us,
            "dispatch_us": statistics.median(dispatch),
            "snapshot_ms": statistics.median(snapshot),
            "bytes_per_ticket": per_ticket,
        }

    return asyncio.run(go())


async def _hold(ws_url: str, name: str) -> ClientConnection:
    ws = await websockets.connect(f"{ws_url}/ws/streaming/{name}")
    await ws.send(json.dumps({"type": "prefill", "messages": USER}))
    while json.loads(await ws.recv())["type"] != "prefill_done":
        pass
    return ws


async def _until(ws: ClientConnection, kind: str) -> float:
    while json.loads(await ws.recv())["type"] != kind:
        pass
    return time.perf_counter()


async def _wire(ws_url: str, gateway_pid: int, n: int, repeats: int) -> dict[str, float]:
    holder = await _hold(ws_url, "holder")
    rss0 = rss_mb(gateway_pid)
    sem = asyncio.Semaphore(200)

    async def join(i: int) -> tuple[int, ClientConnection]:
        async with sem:
            # no keepalive (10,000 sockets in one process would time out their own pings), and no
            # read backpressure: these clients read only when served, and a full buffer would stall
            # their closing handshake
            ws = await websockets.connect(
                f"{ws_url}/ws/streaming/q{i}", open_timeout=60, ping_interval=None, max_queue=None
            )
            await ws.send(json.dumps({"type": "prefill", "messages": USER}))
            while (msg := json.loads(await ws.recv()))["type"] != "queued":
                pass
            return msg["position"], ws

    t0 = time.perf_counter()
    joined = await asyncio.gather(*(join(i) for i in range(n)))
    waiting = [ws for _, ws in sorted(joined, key=lambda pw: pw[0])]  # queue order, not join order
    join_s = time.perf_counter() - t0
    rss1 = rss_mb(gateway_pid)
    latencies = []
    for _ in range(min(repeats, n)):
        head = waiting.pop(0)
        await holder.send(json.dumps({"type": "generate"}))
        released = await _until(holder, "done")
        assigned = await _until(head, "queue_done")
        latencies.append((assigned - released) * 1e3)
        await _until(head, "prefill_done")
        await holder.close()
        holder = head
    for ws in [holder, *waiting]:
        await ws.close()
    return {
        "join_s": join_s,
        "dispatch_ms_p50": statistics.median(latencies),
        "dispatch_ms_max": max(latencies),
        "rss_mb": rss1,
        "kib_per_client": (rss1 - rss0) * 1024 / n,
    }


def run(args: argparse.Namespace) -> int:
    local = {n: in_process(n, args.repeats) for n in args.sizes}
    print_table(
        "WorkerPool in process (median of dispatches)",
        ["queued", "enqueue us", "dispatch us", "positions+ETA ms", "bytes/ticket"],
        [
            [n, r["enqueue_us"], r["dispatch_us"], r["snapshot_ms"], round(r["bytes_per_ticket"])]
            for n, r in local.items()
        ],
    )
    wire: dict[int, dict[str, float]] = {}
    # every simulated client comes from this one address: lift the per-client limits
    unlimited = {"OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0", "OMNIVOX_CLIENT_CONNECT_RATE": "0"}
    limits = {"OMNIVOX_MAX_QUEUE_SIZE": str(max(args.wire_sizes) + 10), **unlimited}
    with cluster(workers=1, env=limits) as c:
        assert c.gateway is not None
        for n in args.wire_sizes:
            wire[n] = asyncio.run(_wire(c.ws, c.gateway.pid, n, args.repeats))
            c.wait(lambda h: h["queue_length"] == 0 and h["workers_idle"] == 1)
    print_table(
        "Real gateway over WebSockets (release -> head client's queue_done)",
        ["queued clients", "join s", "dispatch ms p50", "dispatch ms max", "gateway RSS MB", "KiB/client"],
        [
            [n, r["join_s"], r["dispatch_ms_p50"], r["dispatch_ms_max"], r["rss_mb"], r["kib_per_client"]]
            for n, r in wire.items()
        ],
    )
    write_json(args.json, {"in_process": local, "wire": wire})
    return 0
