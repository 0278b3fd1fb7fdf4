"""Gateway dispatch latency, memory and throughput, for each scheduler store.

Three measurements, for each ``--store`` (memory: one gateway's own pool; redis: a real redis-server
that gateways share):
- in process: the store alone (enqueue cost, dispatch cost on release, the cost of computing every
  ticket's position and ETA, memory per queued ticket in this process);
- over the wire: real gateway processes and an echo worker; N WebSocket clients wait in the queue
  (on one gateway, or alternating between two sharing a Redis store), and we time from a worker's
  release (its holder's ``done``) to the head client's ``queue_done``, and read the gateways'
  resident memory;
- throughput: clients taking short turns in a closed loop on K echo workers, through one gateway and
  through two gateways sharing the store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from typing import Any

import websockets

from omnivox.bench.table import percentile, print_table, rss_mb, write_json
from omnivox.gateway.scheduling.pool import WorkerPool
from omnivox.gateway.scheduling.states import WorkerState
from omnivox.gateway.scheduling.store import SchedulerStore
from omnivox.protocol.control.workers import Capabilities, WorkerHealth
from omnivox.testing.cluster import cluster
from omnivox.testing.gateways import gateway_cluster
from omnivox.testing.redis_server import redis_server

USER = [{"role": "user", "content": "hello"}]
# every simulated client comes from this one address: lift the per-client limits
UNLIMITED = {"OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0", "OMNIVOX_CLIENT_CONNECT_RATE": "0"}
STORES = ("memory", "redis")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", nargs="+", choices=STORES, default=["memory"], help="stores to measure")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000, 10000])
    parser.add_argument("--wire-sizes", type=int, nargs="+", default=[1, 100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=20, help="dispatches timed per size")
    parser.add_argument("--clients", type=int, default=16, help="throughput: clients taking turns")
    parser.add_argument("--workers", type=int, default=4, help="throughput: echo workers")
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput: how long (0: skip)")


# ---- in process


def in_process(n: int, repeats: int) -> dict[str, float]:
    """The memory store's pool alone (synchronous, as the gateway runs it)."""

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
        enqueue_us = (time.perf_counter() - t0) / n * 1e6 if n else float("nan")
        per_ticket = (tracemalloc.get_traced_memory()[0] - before) / n if n else float("nan")
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
            "dispatch_us": statistics.median(dispatch) if dispatch else float("nan"),
            "snapshot_ms": statistics.median(snapshot) if snapshot else float("nan"),
            "bytes_per_ticket": per_ticket,
        }

    return asyncio.run(go())


def _in_process_store(store: SchedulerStore, n: int, repeats: int) -> dict[str, float]:
    """Any store through its interface: one worker busy, n queued; the same figures."""

    async def go() -> dict[str, float]:
        await store.start()
        try:
            wid, _ = await store.register("http://bench")
            await store.report_health(
                wid, WorkerHealth(state=WorkerState.IDLE, engine="echo", capabilities={})
            )
            held = (await store.enqueue("streaming")).future.result()
            t0 = time.perf_counter()
            tickets = [await store.enqueue("streaming", "h") for _ in range(n)]
            enqueue_us = (time.perf_counter() - t0) / max(n, 1) * 1e6
            dispatch, positions = [], []
            for i in range(min(repeats, n)):
                t0 = time.perf_counter()
                await store.release(held, cached_hash="h")  # dispatches the head ticket
                dispatch.append((time.perf_counter() - t0) * 1e6)
                held = tickets[i].future.result()
                tickets.append(await store.enqueue("streaming", "h"))  # keep the queue at n
                t0 = time.perf_counter()
                await store.positions([tickets[-1].ticket_id])
                positions.append((time.perf_counter() - t0) * 1e3)
            return {
                "enqueue_us": enqueue_us,
                "dispatch_us": statistics.median(dispatch) if dispatch else float("nan"),
                "dispatch_us_p99": percentile(dispatch, 99),
                "snapshot_ms": statistics.median(positions) if positions else float("nan"),
            }
        finally:
            await store.close()

    return asyncio.run(go())


@contextlib.contextmanager
def _redis_store(max_queue: int) -> Iterator[SchedulerStore]:
    from omnivox.gateway.cluster.connection import connect, parse_store_url
    from omnivox.gateway.cluster.scheduler import RedisStore

    with redis_server() as server:
        url = parse_store_url(server.unix_url)
        yield RedisStore(connect(url), url=url, max_queue_size=max_queue, background=False)


# ---- over the wire


async def _hold(ws_url: str, name: str) -> Any:
    ws = await websockets.connect(f"{ws_url}/ws/streaming/{name}")
    await ws.send(json.dumps({"type": "prefill", "messages": USER}))
    while json.loads(await ws.recv())["type"] != "prefill_done":
        pass
    return ws


async def _until(ws: Any, kind: str) -> float:
    while json.loads(await ws.recv())["type"] != kind:
        pass
    return time.perf_counter()


async def _wire(ws_urls: Sequence[str], pids: Sequence[int], n: int, repeats: int) -> dict[str, float]:
    """N clients waiting, alternating between the gateways at ``ws_urls``; ``repeats`` dispatches."""
    holder = await _hold(ws_urls[0], "holder")
    rss0 = sum(rss_mb(pid) for pid in pids)
    sem = asyncio.Semaphore(200)

    async def join(i: int) -> tuple[int, Any]:
        async with sem:
            # no keepalive (10,000 sockets in one process would time out their own pings), and no
            # read backpressure: these clients read only when served, and a full buffer would stall
            # their closing handshake
            ws = await websockets.connect(
                f"{ws_urls[i % len(ws_urls)]}/ws/streaming/q{i}",
                open_timeout=60,
                ping_interval=None,
                max_queue=None,
            )
            await ws.send(json.dumps({"type": "prefill", "messages": USER}))
            while (msg := json.loads(await ws.recv()))["type"] != "queued":
                pass
            return msg["position"], ws

    t0 = time.perf_counter()
    joined = await asyncio.gather(*(join(i) for i in range(n)))
    waiting = [ws for _, ws in sorted(joined, key=lambda pw: pw[0])]  # queue order, not join order
    join_s = time.perf_counter() - t0
    await asyncio.sleep(1.0)  # let the notices of the joins settle
    rss1 = sum(rss_mb(pid) for pid in pids)
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
        "dispatch_ms_p99": percentile(latencies, 99),
        "dispatch_ms_max": max(latencies),
        "rss_mb": rss1,
        "kib_per_client": (rss1 - rss0) * 1024 / n,
    }


async def _turns(ws_urls: Sequence[str], clients: int, seconds: float) -> float:
    """Turns per second: ``clients`` clients taking one short turn after another for ``seconds``."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def client(i: int) -> None:
        nonlocal done
        async with websockets.connect(f"{ws_urls[i % len(ws_urls)]}/ws/streaming/t{i}") as ws:
            while time.perf_counter() < deadline:
                await ws.send(json.dumps({"type": "prefill", "messages": USER}))
                await _until(ws, "prefill_done")
                await ws.send(json.dumps({"type": "generate"}))
                await _until(ws, "done")
                done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return done / (time.perf_counter() - t0)


# ---- the run


def _wire_rows(args: argparse.Namespace) -> tuple[list[list[Any]], dict[str, Any]]:
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    env = {"OMNIVOX_MAX_QUEUE_SIZE": str(max(args.wire_sizes) + 10), **UNLIMITED}
    setups = [("memory", 1)] if "memory" in args.store else []
    setups += [("redis", 1), ("redis", 2)] if "redis" in args.store else []
    for store, count in setups:
        with _gateways(store, count, 1, env) as (urls, pids, wait_idle):
            for n in args.wire_sizes:
                r = asyncio.run(_wire(urls, pids, n, args.repeats))
                raw[f"{store}x{count}/{n}"] = r
                rows.append([store, count, n, r["join_s"], r["dispatch_ms_p50"], r["dispatch_ms_p99"]])
                rows[-1] += [r["dispatch_ms_max"], r["rss_mb"], r["kib_per_client"]]
                wait_idle()
    return rows, raw


def _throughput_rows(args: argparse.Namespace) -> tuple[list[list[Any]], dict[str, Any]]:
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    setups = [("memory", 1)] if "memory" in args.store else []
    setups += [("redis", 1), ("redis", 2)] if "redis" in args.store else []
    for store, count in setups:
        with _gateways(store, count, args.workers, UNLIMITED) as (urls, _pids, _wait):
            rate = asyncio.run(_turns(urls, args.clients, args.seconds))
        raw[f"{store}x{count}"] = rate
        rows.append([store, count, args.workers, args.clients, rate])
    return rows, raw


@contextlib.contextmanager
def _gateways(store: str, count: int, workers: int, env: dict[str, str]) -> Iterator[Any]:
    """(ws URLs, gateway pids, wait-until-idle) of ``count`` gateways on ``store``."""
    if store == "memory":
        with cluster(workers=workers, env=env) as c:
            assert c.gateway is not None
            yield [c.ws], [c.gateway.pid], lambda: c.wait(lambda h: h["queue_length"] == 0)
    else:
        with gateway_cluster(gateways=count, workers=workers, env=env) as g:
            idle = lambda: [g.wait(x, lambda h: h.get("queue_length") == 0) for x in g.gateways]  # noqa: E731
            yield [x.ws for x in g.gateways], [x.pid for x in g.gateways], idle


def run(args: argparse.Namespace) -> int:
    local: dict[str, dict[int, dict[str, float]]] = {}
    rows = []
    for store in args.store:
        local[store] = {}
        for n in args.sizes:
            if store == "memory":
                r = in_process(n, args.repeats)
            else:
                with _redis_store(n + args.repeats + 10) as redis_store:
                    r = _in_process_store(redis_store, n, args.repeats)
            local[store][n] = r
            rows.append([store, n, r["enqueue_us"], r["dispatch_us"], r["snapshot_ms"]])
    print_table(
        "The store in process (medians; redis: over its unix socket)",
        ["store", "queued", "enqueue us", "dispatch us", "positions+ETA ms"],
        rows,
    )
    wire, wire_raw = _wire_rows(args)
    print_table(
        "Real gateways over WebSockets (release -> head client's queue_done; clients alternate gateways)",
        ["store", "gateways", "queued", "join s", "p50 ms", "p99 ms", "max ms", "RSS MB", "KiB/client"],
        wire,
    )
    through_raw: dict[str, Any] = {}
    if args.seconds > 0:
        through, through_raw = _throughput_rows(args)
        print_table(
            "Throughput: short turns in a closed loop (clients spread over the gateways)",
            ["store", "gateways", "workers", "clients", "turns/s"],
            through,
        )
    write_json(args.json, {"in_process": local, "wire": wire_raw, "throughput": through_raw})
    return 0
