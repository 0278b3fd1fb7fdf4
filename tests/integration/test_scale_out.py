"""Past one gateway, on real processes: two ``omnivox gateway --store redis://`` processes, one real
redis-server, echo workers that register with both.

- clients alternating between the gateways are served in arrival order, never two at once;
- ``kill -9`` a gateway with 40 clients waiting on both: the other's are all served in order, the
  dead one's worker comes back, the store is empty at the end;
- ``kill -9`` a gateway, and its waiting clients come back to the other with their resume tokens,
  at once or after it was reaped: each takes its old place, all are served in arrival order;
- ``SIGSTOP`` a gateway past its lease, then ``SIGCONT``: its stale connection is refused by the
  worker at the handshake, its client goes back to its place and is served, and nothing overlaps;
- a worker killed while idle is assigned a client before anyone notices: the client goes back to
  its place and is served by the next worker, ahead of those who came after it;
- redis-server restarted empty mid-run: the gateways re-assert, everyone is served in order, nothing
  overlaps;
- an ephemeral key minted on one gateway opens exactly one session on the other.

The worker logs each session's start and end (its fencing epoch, the system's monotonic clock) and
each refusal; the checks read those logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import httpx
import pytest
import redis
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from omnivox.testing.gateways import Gateway, GatewayCluster, gateway_cluster
from scaleout_checks import ENV, USER, WORKER_LOG, assert_no_overlap, worker_sessions
from wsclient import JsonClient, StreamingClient


class Waiter:
    """A client that joins the queue (waiting until it hears its place), then takes one turn when
    served, and records when. ``resume``: the token of a place it held on a gateway that died."""

    def __init__(self, gateway: Gateway, name: str, resume: str | None = None) -> None:
        query = f"?resume={resume}" if resume else ""
        self.client = JsonClient(f"{gateway.ws}/ws/streaming/{name}{query}", timeout=60)
        self.gateway = gateway
        self.name = name
        self.served_at: float | None = None
        self.outcome = "waiting"
        self.error: str | None = None
        self.first: dict = {}

    async def join(self) -> None:
        await self.client.__aenter__()
        await self.client.send("prefill", messages=USER)
        self.first = await self.client.recv()
        assert self.first["type"] in ("queued", "queue_done"), self.first

    async def finish(self) -> None:
        try:
            got = await self.client.until("prefill_done", "error")
            if got[-1]["type"] == "error":
                self.outcome, self.error = "refused", got[-1]["code"]
                return
            self.served_at = time.monotonic()
            await self.client.send("generate")
            await self.client.until("done")
            self.outcome = "served"
        except ConnectionClosed:
            self.outcome = "gateway gone"
        finally:
            await self.client.__aexit__(None, None, None)


async def hold(gateway: Gateway, name: str = "holder") -> StreamingClient:
    """A client holding the worker: a turn holds it from prefill to done."""
    client = StreamingClient(gateway.ws, name, timeout=30)
    await client.__aenter__()
    await client.send("prefill", messages=USER)
    got = await client.until("prefill_done", "error")
    assert got[-1]["type"] == "prefill_done", got
    return client


async def let_go(client: StreamingClient) -> None:
    await client.send("generate")
    await client.until("done")
    await client.__aexit__(None, None, None)


def store_keys(c: GatewayCluster, pattern: str) -> list[str]:
    with redis.Redis.from_url(c.redis.url, decode_responses=True) as r:
        return sorted(r.scan_iter(match="{ovx}:" + pattern))


def nothing_left_in_store(c: GatewayCluster, g: Gateway, within_s: float = 10.0) -> None:
    """No ticket and no queue entry left. A served client's ticket goes when its gateway sees the
    session end, a moment after the client saw its last word: so wait for it, then say what is left."""
    with contextlib.suppress(TimeoutError):
        c.wait(g, lambda h: not store_keys(c, "t:*") and not store_keys(c, "q:*"), within_s)
    assert store_keys(c, "t:*") == store_keys(c, "q:*") == []


def worker_log(tmp_path: Path, i: int = 0) -> Path:
    return tmp_path / f"worker{i}.log"


@pytest.fixture
def two_gateways(tmp_path: Path):
    with gateway_cluster(gateways=2, workers=0, log_dir=tmp_path, **ENV) as c:
        c.add_worker(**WORKER_LOG)
        c.wait_idle(1)
        yield c


async def test_clients_alternating_between_gateways_are_served_in_arrival_order(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(a)
    waiters = [Waiter(b if i % 2 == 0 else a, f"c{i}") for i in range(8)]
    for w in waiters:
        await w.join()  # in this order: each heard its place before the next came
    assert a.health()["queue_length"] == b.health()["queue_length"] == 8
    # either gateway lists every gateway's sessions, each with the gateway holding it
    listed = httpx.get(b.url + "/api/sessions", timeout=5).json()
    assert listed["active_sessions"] == 9 and all(g["reachable"] for g in listed["gateways"])
    assert len({s["gateway"] for s in listed["sessions"]}) == 2
    tasks = [asyncio.ensure_future(w.finish()) for w in waiters]
    await let_go(holder)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert [w.outcome for w in waiters] == ["served"] * 8
    served = sorted(waiters, key=lambda w: w.served_at or 0)
    assert [w.name for w in served] == [w.name for w in waiters]
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert len(sessions) == 9 and refusals == []
    assert_no_overlap(sessions)


async def test_kill_9_a_gateway_with_40_waiting_loses_only_its_own_sockets(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(a)  # the worker serves A's client when A dies
    waiters = [Waiter(a if i % 2 == 0 else b, f"c{i}") for i in range(40)]
    for w in waiters:
        await w.join()
    tasks = [asyncio.ensure_future(w.finish()) for w in waiters]
    c.kill(a)
    await asyncio.wait_for(asyncio.gather(*tasks), 90)
    on_a = [w for w in waiters if w.gateway is a]
    on_b = [w for w in waiters if w.gateway is b]
    assert {w.outcome for w in on_a} == {"gateway gone"}
    assert [w.outcome for w in on_b] == ["served"] * 20
    served = sorted(on_b, key=lambda w: w.served_at or 0)
    assert [w.name for w in served] == [w.name for w in on_b]  # in their arrival order
    # the dead gateway's worker came back (its own health said free), and nothing is left behind
    health = c.wait(b, lambda h: h["queue_length"] == 0 and h["workers_idle"] == 1, 10)
    assert [g["gateway_id"] for g in health["store"]["gateways"]] == [health["store"]["gateway_id"]]
    # A's waiters kept their places for the resume grace (4 s) in case they came back: then gone
    nothing_left_in_store(c, b, 15)
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert len(sessions) == 21 and refusals == []
    assert_no_overlap(sessions)
    with pytest.raises(ConnectionClosed):
        await let_go(holder)
    # the worker's heartbeats moved to the live gateway
    assert f"registered with {b.url}" in worker_log(tmp_path).read_text()


async def test_a_dead_gateway_s_waiters_come_back_to_the_other_and_keep_their_places(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(b)  # the worker is B's client's while A dies and its waiters come back
    waiters = [Waiter(a if i % 2 == 0 else b, f"c{i}") for i in range(12)]
    for w in waiters:
        await w.join()
    assert all(w.first["type"] == "queued" and w.first["resume_token"] for w in waiters)
    c.kill(a)
    on_a = [w for w in waiters if w.gateway is a]
    for w in on_a:
        with pytest.raises(ConnectionClosed):
            await w.client.until("prefill_done")
    # half come back at once (A's lease still runs: their tickets are still A's) ...
    back = {w.name: Waiter(b, w.name, resume=w.first["resume_token"]) for w in on_a}
    early, late = on_a[:3], on_a[3:]
    for w in early:
        await back[w.name].join()
    # ... half after the others reaped A (its waiters stepped out of the line, keeping their places)
    c.wait(b, lambda h: len(h["store"]["gateways"]) == 1, 10)
    for w in late:
        await back[w.name].join()
    for w in on_a:
        first = back[w.name].first
        assert first["type"] == "queued" and first["resumed"] is True, first
        assert first["ticket_id"] == w.first["ticket_id"]
    clients = [back.get(w.name, w) if w.gateway is a else w for w in waiters]
    tasks = [asyncio.ensure_future(w.finish()) for w in clients]
    await let_go(holder)
    await asyncio.wait_for(asyncio.gather(*tasks), 90)
    assert [w.outcome for w in clients] == ["served"] * 12
    served = sorted(clients, key=lambda w: w.served_at or 0)
    assert [w.name for w in served] == [w.name for w in waiters]  # every place kept, in order
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert len(sessions) == 13 and refusals == []
    assert_no_overlap(sessions)
    nothing_left_in_store(c, b)


async def test_a_gateway_paused_past_its_lease_is_fenced_by_the_worker(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(b)
    paused = Waiter(a, "paused")
    await paused.join()  # the head of the queue, on A
    late = Waiter(b, "late")
    await late.join()
    tasks = [asyncio.ensure_future(w.finish()) for w in (paused, late)]
    c.pause(a)
    try:
        await let_go(holder)  # the worker goes to A's client, but A sleeps and never connects ...
        # ... until its lease runs out: B reaps it, and the worker (free by its own word) serves B's
        for _ in range(100):
            if late.served_at is not None:
                break
            await asyncio.sleep(0.1)
        assert late.served_at is not None
    finally:
        c.resume(a)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert_no_overlap(sessions)
    assert late.outcome == "served"
    # A's assignment, made while it slept, is the one epoch the worker never served. If A woke still
    # holding it, it connected with it, the worker refused it at the handshake (409) and A put its
    # client back at its place; if it woke to find itself reaped first (its read of the assignment
    # timed out), it put its client back in the queue. Either way the client is served after, never
    # refused, and a connection carrying that epoch is refused by the worker.
    served = {int(e) for _, _, e in sessions}
    stale = min(set(range(1, max(served) + 1)) - served)
    assert refusals in ([], [("stale_assignment", str(stale))])
    assert paused.outcome == "served", (paused.error, paused.client.seen)
    url = f"{c.worker_urls[0].replace('http', 'ws')}/ws/streaming/stale?worker_id=w&ticket=t&epoch={stale}"
    with pytest.raises(InvalidStatus) as refused:  # refused before any socket (or session) opens
        await websockets.connect(url, additional_headers={"x-omnivox-gateway": "1"})
    assert refused.value.response.status_code == 409
    assert json.loads(refused.value.response.body or b"{}")["code"] == "stale_assignment"
    assert worker_sessions(worker_log(tmp_path))[1][-1] == ("stale_assignment", str(stale))


async def test_a_client_whose_assigned_worker_is_gone_gets_the_next_one_in_its_place(tmp_path):
    with gateway_cluster(gateways=2, workers=0, log_dir=tmp_path, **ENV) as c:
        a, b = c.gateways
        for _ in range(2):
            c.add_worker(**WORKER_LOG)
        c.wait_idle(2)
        holder = await hold(a)
        workers = httpx.get(a.url + "/api/workers", timeout=5).json()["workers"]
        idle = next(w for w in workers if w["state"] == "IDLE")
        dead = c.worker_urls.index(idle["url"])
        c.workers[dead].kill()  # gone between its last health check and the next assignment
        c.workers[dead].wait(10)
        first, second = Waiter(b, "first"), Waiter(a, "second")
        await first.join()  # given the dead worker: it cannot connect, and goes back to its place
        await second.join()
        tasks = [asyncio.ensure_future(w.finish()) for w in (first, second)]
        await let_go(holder)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert [w.outcome for w in (first, second)] == ["served"] * 2, first.client.seen
        assert first.served_at is not None and second.served_at is not None
        assert first.served_at < second.served_at  # it kept its place ahead of the later client
        states = {
            w["url"]: w["state"] for w in httpx.get(b.url + "/api/workers", timeout=5).json()["workers"]
        }
        assert states[idle["url"]] == "OFFLINE"
        live = 1 - dead
        sessions, refusals = worker_sessions(worker_log(tmp_path, live))
        assert len(sessions) == 3 and refusals == []
        assert_no_overlap(sessions)
        nothing_left_in_store(c, b)


async def test_redis_restarted_empty_mid_run_the_gateways_re_assert(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(a)
    waiters = [Waiter(b if i % 2 == 0 else a, f"c{i}") for i in range(6)]
    for w in waiters:
        await w.join()
    tasks = [asyncio.ensure_future(w.finish()) for w in waiters]
    c.redis.restart_empty()
    for g in (a, b):  # each re-asserted its waiters: the queue is whole again
        c.wait(g, lambda h: h.get("queue_length") == 6, 15)
    await let_go(holder)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert [w.outcome for w in waiters] == ["served"] * 6
    served = sorted(waiters, key=lambda w: w.served_at or 0)
    assert [w.name for w in served] == [w.name for w in waiters]
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert refusals == []
    assert_no_overlap(sessions)
    nothing_left_in_store(c, a)


async def test_an_ephemeral_key_from_one_gateway_opens_exactly_one_session_on_the_other(tmp_path):
    key = {"OMNIVOX_API_KEY": "sk-test-cluster"}
    with gateway_cluster(gateways=2, workers=1, log_dir=tmp_path, **ENV, **key) as c:
        a, b = c.gateways
        auth = {"Authorization": "Bearer sk-test-cluster"}
        minted = httpx.post(f"{a.url}/v1/realtime/client_secrets", json={}, headers=auth, timeout=5).json()
        ek = minted["value"]
        assert ek.startswith("ek_")
        url = f"{b.ws}/ws/streaming/ek1"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {ek}"}) as ws:
            await ws.send('{"type": "prefill", "messages": [{"role": "user", "content": "hi"}]}')
            assert '"prefill_done"' in await ws.recv() or '"prefill_done"' in await ws.recv()
        for g in (a, b):  # spent: on either gateway, again, it opens nothing
            async with websockets.connect(
                f"{g.ws}/ws/streaming/ek2", additional_headers={"Authorization": f"Bearer {ek}"}
            ) as ws:
                refusal = await ws.recv()
                assert '"unauthorized"' in refusal


async def test_with_the_store_down_new_sessions_are_refused_and_running_ones_go_on(two_gateways, tmp_path):
    c = two_gateways
    a, b = c.gateways
    holder = await hold(a)
    c.redis.stop()
    try:
        for g in (a, b):  # a new session: refused as it connects, saying why
            async with StreamingClient(g.ws, "refused", timeout=30) as late:
                refusal = await late.recv()
            assert refusal["code"] == "service_unavailable"
        health = c.wait(a, lambda h: h["status"] == "degraded" and not h["store"]["up"], 10)
        assert health["store"]["kind"] == "redis"
        # the running session goes on: the relay never touches the store
        await let_go(holder)
        assert c.wait(a, lambda h: h["store"]["pending_operations"] >= 1, 10)  # its release, kept
    finally:
        c.redis.start()  # back, empty: the gateways re-assert, the worker re-registers
    c.wait_idle(1, 30)
    after = Waiter(b, "after")
    await after.join()
    await asyncio.wait_for(after.finish(), 30)
    assert after.outcome == "served"
    sessions, refusals = worker_sessions(worker_log(tmp_path))
    assert refusals == []
    assert_no_overlap(sessions)
