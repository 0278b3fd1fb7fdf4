"""What a client may meet on any gateway, on one real redis-server: an ephemeral key minted on one
gateway opens exactly one session on any; per-client limits count every gateway's connections (and
forget a dead gateway's); the call directory says which gateway holds a call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from omnivox.core.errors import TooManySessions, Unauthorized
from omnivox.gateway.cluster.client_keys import RedisClientKeys
from omnivox.gateway.cluster.limits import RedisClientLimits
from omnivox.gateway.cluster.peers import RedisPeers
from omnivox.gateway.cluster.scheduler import RedisStore
from omnivox.gateway.edges.client_keys import is_ephemeral
from redis_server import RedisServer
from stores import FakeClock, prefix, redis_store

Gateways = Callable[[int], Awaitable[list[RedisStore]]]


@pytest.fixture
async def gateways(redis_db: RedisServer, clock: FakeClock) -> AsyncIterator[Gateways]:
    made: list[RedisStore] = []
    key = prefix()

    async def make(n: int) -> list[RedisStore]:
        stores = [redis_store(redis_db.unix_url, key, clock, gateway_id=f"g{i}") for i in range(n)]
        for s in stores:
            s.info["url"] = f"http://gateway-{s.gateway_id}:8000"
            await s.start()
        made.extend(stores)
        return stores

    yield make
    for s in made:
        await s.close()


async def test_a_key_minted_on_one_gateway_opens_one_session_on_any(gateways):
    a, b = await gateways(2)
    wall = FakeClock(1000.0)
    on_a, on_b = RedisClientKeys(a, 10, clock=wall), RedisClientKeys(b, 10, clock=wall)
    key, grant = await on_a.mint(60, {"instructions": "hi"})
    assert is_ephemeral(key) and grant.expires_at == 1060
    stored = [k async for k in a.client.scan_iter(match=f"{a.prefix}:ek:*")]
    assert len(stored) == 1 and key not in stored[0]  # held by digest only
    await on_b.check(key)  # checking spends nothing
    assert (await on_b.take(key)).session == {"instructions": "hi"}
    for keys in (on_a, on_b):
        with pytest.raises(Unauthorized, match="already used"):
            await keys.take(key)
    assert [k async for k in a.client.scan_iter(match=f"{a.prefix}:ek:*")] == []


async def test_expired_keys_are_refused_and_the_outstanding_count_is_shared(gateways, clock):
    a, b = await gateways(2)
    wall = FakeClock(1000.0)
    on_a, on_b = RedisClientKeys(a, 2, clock=wall), RedisClientKeys(b, 2, clock=wall)
    key, _ = await on_a.mint(10)
    wall.now += 10
    with pytest.raises(Unauthorized):
        await on_b.take(key)
    await on_a.mint(60)
    await on_b.mint(60)
    with pytest.raises(TooManySessions):
        await on_a.mint(60)
    clock.now += 61  # the store's time: the two expire, making room
    await on_b.mint(60)


async def test_one_client_holds_its_share_of_keys_on_every_gateway(gateways):
    a, b = await gateways(2)
    wall = FakeClock(1000.0)
    on_a, on_b = RedisClientKeys(a, 10, 2, clock=wall), RedisClientKeys(b, 10, 2, clock=wall)
    first, _ = await on_a.mint(60, owner="10.0.0.1")
    await on_b.mint(60, owner="10.0.0.1")
    with pytest.raises(TooManySessions, match="this client"):
        await on_a.mint(60, owner="10.0.0.1")  # its two, minted on either gateway
    await on_a.mint(60, owner="10.0.0.2")  # another client is not held up
    await on_b.take(first)
    await on_a.mint(60, owner="10.0.0.1")  # spent on any gateway: its place is back


async def test_a_client_s_connections_are_counted_on_every_gateway(gateways):
    a, b = await gateways(2)
    on_a, on_b = RedisClientLimits(a, 2, 0, 1), RedisClientLimits(b, 2, 0, 1)
    async with on_a.hold("10.0.0.1"), on_b.hold("10.0.0.1"):
        with pytest.raises(TooManySessions, match="2 connections"):
            async with on_a.hold("10.0.0.1"):
                pass
        async with on_b.hold("10.0.0.2"):  # another address is not affected
            pass
    async with on_a.hold("10.0.0.1"), on_b.hold("10.0.0.1"):
        pass  # room again once they ended
    assert [k async for k in a.client.scan_iter(match=f"{a.prefix}:open:*")] == []


async def test_the_connect_rate_is_one_bucket_whichever_gateway_is_reached(gateways, clock):
    a, b = await gateways(2)
    on_a, on_b = RedisClientLimits(a, 0, 2.0, 3), RedisClientLimits(b, 0, 2.0, 3)
    for limits in (on_a, on_b, on_a):
        async with limits.hold("x"):
            pass
    with pytest.raises(TooManySessions, match="per second"):
        async with on_b.hold("x"):
            pass
    clock.now += 0.5  # one token back at 2 per second
    async with on_b.hold("x"):
        pass


async def test_a_reaped_gateway_s_connections_stop_counting(gateways, clock):
    a, b = await gateways(2)
    on_a, on_b = RedisClientLimits(a, 1, 0, 1), RedisClientLimits(b, 1, 0, 1)
    async with on_a.hold("x"):
        clock.now += 4  # A stops beating (it died holding the connection)
        await b.membership.beat()
        await b.membership.reap()
        async with on_b.hold("x"):
            pass


async def test_the_call_directory_names_the_gateway_holding_a_call(gateways):
    a, b = await gateways(2)
    held: list[str] = []
    on_a, on_b = RedisPeers(a, lambda: held), RedisPeers(b, list)
    held.append("rtc_1")
    on_a.call_started("rtc_1")
    for _ in range(100):
        if await on_b.call_owner("rtc_1") is not None:
            break
    assert await on_b.call_owner("rtc_1") == a.info["url"]
    assert await on_a.call_owner("rtc_1") is None  # its own: not another's
    assert await on_b.call_owner("rtc_nope") is None
    assert await on_b.others() == [(a.gateway_id, a.info["url"])]
    held.clear()
    on_a.call_ended("rtc_1")
    for _ in range(100):
        if await on_b.call_owner("rtc_1") is None:
            break
    assert await on_b.call_owner("rtc_1") is None
