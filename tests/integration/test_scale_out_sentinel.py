"""The store behind Redis Sentinel, on real processes: a primary, a replica and a sentinel (Debian's
``redis-server``), two gateways on ``redis+sentinel://``, an echo worker.

The primary is killed (-9) with a client holding the worker; the sentinel promotes the replica, and
the gateways follow it without a restart: the held session ends normally, every later client on
either gateway is served (a client arriving during the failover is served or refused with a reason,
never left hanging), the worker is idle again and the new primary holds no ticket at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest
import redis
from websockets.exceptions import ConnectionClosed

from omnivox.testing.gateways import Gateway, GatewayCluster
from omnivox.testing.redis_server import RedisServer
from scaleout_checks import ENV, USER, WORKER_LOG, assert_no_overlap, worker_sessions
from wsclient import StreamingClient

SERVICE = "omnivox"


def sentinel_config(directory: Path, primary: RedisServer) -> Path:
    directory.mkdir()
    conf = directory / "sentinel.conf"  # the sentinel rewrites it with what it learns
    conf.write_text(
        f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 1\n"
        f"sentinel down-after-milliseconds {SERVICE} 1000\n"
        f"sentinel failover-timeout {SERVICE} 5000\n"
    )
    return conf


def primary_port(sentinel: RedisServer) -> int:
    with redis.Redis(port=sentinel.port, decode_responses=True) as r:
        _host, port = r.sentinel_get_master_addr_by_name(SERVICE)
    return int(port)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def replicated(replica: RedisServer) -> bool:
    with redis.Redis(port=replica.port, decode_responses=True) as r:
        return r.info("replication").get("master_link_status") == "up"


async def turn(gateway: Gateway, name: str) -> str:
    """One streaming turn: ``served``, ``refused:<code>`` (said in an error message, or in the close
    that came before the client could ask), or ``gone`` (closed with no reason)."""
    c = StreamingClient(gateway.ws, name, timeout=30)
    try:
        async with c:
            await c.send("prefill", messages=USER)
            got = await c.until("prefill_done", "error")
            if got[-1]["type"] == "error":
                return f"refused:{got[-1]['code']}"
            await c.send("generate")
            end = await c.until("done", "error")
            return "served" if end[-1]["type"] == "done" else f"refused:{end[-1]['code']}"
    except ConnectionClosed:  # closed before the client asked: the reason came first, if any
        said = [m for m in c.seen if m["type"] == "error"] or await drained_errors(c)
        return f"refused:{said[0]['code']}" if said else "gone"


async def drained_errors(c: StreamingClient) -> list[dict]:
    """The error messages that arrived before the close and were not read yet."""
    errors = []
    with contextlib.suppress(ConnectionClosed, TimeoutError):
        while True:
            if (msg := await c.recv())["type"] == "error":
                errors.append(msg)
    return errors


def start(server: RedisServer, started: list[RedisServer]) -> RedisServer:
    server.dir.mkdir(exist_ok=True)
    started.append(server)
    server.start()
    return server


@pytest.fixture
def sentinel_cluster(tmp_path):
    started: list[RedisServer] = []
    try:
        primary = start(RedisServer(tmp_path / "primary"), started)
        replica_of = ["--replicaof", "127.0.0.1", str(primary.port)]
        replica = start(RedisServer(tmp_path / "replica", extra=replica_of), started)
        wait_until(lambda: replicated(replica), 20, "the replica never synced")
        conf = sentinel_config(tmp_path / "sentinel", primary)
        sentinel = start(RedisServer(tmp_path / "sentinel", config=conf, extra=["--sentinel"]), started)
        url = f"redis+sentinel://127.0.0.1:{sentinel.port}/{SERVICE}"
        c = GatewayCluster(primary, env={**ENV, **WORKER_LOG}, log_dir=tmp_path, store_url=url)
        try:
            c.start_gateway()
            c.start_gateway()
            c.add_worker()
            c.wait_idle(1)
            yield c, replica, sentinel
        finally:
            c.stop()
    finally:
        for server in started:
            server.stop()


async def test_a_sentinel_failover_is_followed_without_losing_a_session_or_a_client(
    sentinel_cluster, tmp_path
):
    c, replica, sentinel = sentinel_cluster
    a, b = c.gateways
    assert await turn(a, "before-a") == "served" and await turn(b, "before-b") == "served"

    holder = StreamingClient(a.ws, "holder", timeout=60)
    await holder.__aenter__()
    await holder.send("prefill", messages=USER)
    assert (await holder.until("prefill_done", "error"))[-1]["type"] == "prefill_done"

    c.redis.stop()  # kill -9 the primary, mid-session
    during = asyncio.create_task(turn(b, "during"))  # arrives while no primary answers
    await asyncio.to_thread(
        wait_until,
        lambda: primary_port(sentinel) == replica.port,
        30,
        "the sentinel never promoted the replica",
    )
    # the held session was never the store's to lose: it ends normally
    await holder.send("generate")
    assert (await holder.until("done", "error"))[-1]["type"] == "done"
    await holder.__aexit__(None, None, None)
    outcome = await asyncio.wait_for(during, 60)
    assert outcome == "served" or outcome.startswith("refused:service_unavailable"), outcome

    # once promoted, the gateways find the new primary at their next beat; then every client on
    # either gateway is served
    for gateway in (a, b):
        c.wait(gateway, lambda h: h["status"] == "ok", 30)
    after = [await turn(gateway, f"after-{i}") for i in range(3) for gateway in (a, b)]
    assert after == ["served"] * 6, after
    c.wait_idle(1)
    for gateway in (a, b):
        assert gateway.health()["status"] == "ok", gateway.health()
    with redis.Redis(port=replica.port, decode_responses=True) as r:
        assert r.info("replication")["role"] == "master"
        # the last ticket leaves when its gateway sees its session end (a moment after the client)
        wait_until(lambda: not list(r.scan_iter(match="{ovx}:t:*")), 10, "tickets left in the store")
    sessions, _refusals = worker_sessions(tmp_path / "worker0.log")
    assert_no_overlap(sessions)
