"""Seats past one gateway, on real processes: one echo worker process of three seats registering
with two ``omnivox gateway --store redis://`` gateways and one real redis-server. Each seat is a
worker in the shared store (its own id, URL and epochs): three clients hold the three seats at
once, a fourth waits in the queue and gets the first seat freed, and nothing is left in the store."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path

import httpx
import redis

from omnivox.testing.gateways import GatewayCluster, gateway_cluster
from scaleout_checks import ENV, USER, WORKER_LOG
from wsclient import StreamingClient

SEATS = 3


SESSION_LINE = re.compile(r"session (start|end): epoch=(\d+) ticket=\S+ t=([\d.]+) seat=(\d+)")


def seat_sessions(log: Path) -> dict[str, list[tuple[float, float, int]]]:
    """From the worker process's log: each seat's sessions (start, end, epoch), in order."""
    starts: dict[tuple[str, str], float] = {}
    sessions: dict[str, list[tuple[float, float, int]]] = {}
    for m in SESSION_LINE.finditer(log.read_text(errors="replace")):
        what, epoch, at, seat = m.groups()
        if what == "start":
            starts[(seat, epoch)] = float(at)
        else:
            sessions.setdefault(seat, []).append((starts.pop((seat, epoch)), float(at), int(epoch)))
    return {seat: sorted(runs) for seat, runs in sessions.items()}


def store_keys(c: GatewayCluster, pattern: str) -> list[str]:
    with redis.Redis.from_url(c.redis.url, decode_responses=True) as r:
        return sorted(r.scan_iter(match="{ovx}:" + pattern))


async def test_each_seat_is_a_worker_of_the_shared_store(tmp_path) -> None:
    with gateway_cluster(gateways=2, workers=0, log_dir=tmp_path, **ENV) as c:
        c.add_worker(seats=SEATS, **WORKER_LOG)
        c.wait_idle(SEATS)
        a, b = c.gateways
        for gateway in (a, b):
            listed = httpx.get(gateway.url + "/api/workers", timeout=5).json()["workers"]
            assert sorted(w["url"] for w in listed) == c.worker_urls  # .../seats/0, 1, 2
        holders = [StreamingClient((a, b, a)[i].ws, f"h{i}", timeout=30) for i in range(SEATS)]
        for holder in holders:  # a turn holds its seat from prefill to done
            await holder.__aenter__()
            await holder.send("prefill", messages=USER)
            assert (await holder.until("prefill_done", "error"))[-1]["type"] == "prefill_done"
        c.wait(b, lambda h: h["workers_idle"] == 0)
        async with StreamingClient(b.ws, "waiter", timeout=30) as waiter:
            await waiter.send("prefill", messages=USER)
            assert (await waiter.recv())["type"] == "queued"  # every seat taken: it waits its turn
            await holders[1].send("generate")
            await holders[1].until("done")
            await holders[1].__aexit__(None, None, None)  # a seat is freed: the waiter gets it
            assert (await waiter.until("prefill_done", "error"))[-1]["type"] == "prefill_done"
            await waiter.send("generate")
            assert "hello" in "".join(m.get("text_delta", "") for m in await waiter.until("done"))
        for holder in (holders[0], holders[2]):
            await holder.send("generate")
            await holder.until("done")
            await holder.__aexit__(None, None, None)
        c.wait_idle(SEATS)
        listed = httpx.get(a.url + "/api/workers", timeout=5).json()["workers"]
        served = {w["url"]: w["sessions_served"] for w in listed}
        assert sum(served.values()) == SEATS + 1 and all(n >= 1 for n in served.values()), served
        for _ in range(100):  # nothing held in the store (10 s at most): no ticket, no queue entry
            if not store_keys(c, "t:*") and not store_keys(c, "q:*"):
                break
            await asyncio.sleep(0.1)
        assert store_keys(c, "t:*") == store_keys(c, "q:*") == []
    # on each seat: one session at a time, each on a newer epoch than the one before
    per_seat = seat_sessions(tmp_path / "worker0.log")
    assert (
        sorted(per_seat) == [str(i) for i in range(SEATS)] and sum(map(len, per_seat.values())) == SEATS + 1
    )
    for runs in per_seat.values():
        for (_, end, epoch), (start, _, later) in itertools.pairwise(runs):
            assert end <= start and epoch < later, runs
