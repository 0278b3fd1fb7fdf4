"""Ephemeral client keys: one session each, until they expire; held by digest."""

from __future__ import annotations

import hashlib

import pytest

from omnivox.core.errors import TooManySessions, Unauthorized
from omnivox.gateway.edges.client_keys import PREFIX, ClientKeys, Grant, is_ephemeral


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_a_key_opens_one_session_and_carries_its_defaults() -> None:
    keys = ClientKeys(10, clock=Clock())
    key, grant = await keys.mint(60, {"instructions": "hi"})
    assert is_ephemeral(key) and grant.expires_at == 1060
    assert key not in str(keys._keys)  # held by digest only
    await keys.check(key)  # checking spends nothing
    assert (await keys.take(key)).session == {"instructions": "hi"}
    with pytest.raises(Unauthorized, match="already used"):
        await keys.take(key)
    with pytest.raises(Unauthorized):
        await keys.check("ek_never-minted")


async def test_expired_keys_are_refused_and_forgotten() -> None:
    clock = Clock()
    keys = ClientKeys(2, clock=clock)
    key, _ = await keys.mint(10)
    clock.now += 10
    with pytest.raises(Unauthorized, match="expired"):
        await keys.check(key)
    with pytest.raises(Unauthorized, match="expired"):
        await keys.take(key)
    await keys.mint(10)
    await keys.mint(10)
    with pytest.raises(TooManySessions):
        await keys.mint(10)
    clock.now += 11
    await keys.mint(10)  # the expired ones made room
    assert len(keys) == 1


def test_a_call_keeps_only_the_candidates_on_its_addresses() -> None:
    from omnivox.gateway.edges.calls import keep_candidates

    offer = "\r\n".join(
        [
            "v=0",
            "a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host",
            "a=candidate:2 1 udp 2130706431 192.0.2.2 5001 typ host",
            "a=candidate:3 1 udp 2130706431 abc.local 5002 typ host",
            "a=end-of-candidates",
        ]
    )
    kept = keep_candidates(offer, ["127.0.0.1"]).split("\r\n")
    assert kept == ["v=0", "a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host", "a=end-of-candidates"]


def test_is_ephemeral():
    assert is_ephemeral("ek_abc")
    assert is_ephemeral(PREFIX)
    assert not is_ephemeral(None)
    assert not is_ephemeral("")
    assert not is_ephemeral("sk_abc")
    assert not is_ephemeral("EK_abc")


async def test_minted_keys_are_long_random_and_distinct():
    keys = ClientKeys(100, clock=Clock())
    minted = {(await keys.mint(60))[0] for _ in range(20)}
    assert len(minted) == 20
    for key in minted:
        assert key.startswith(PREFIX) and len(key) >= len(PREFIX) + 43
        assert all(c.isalnum() or c in "-_" for c in key[len(PREFIX) :])
    assert len(keys) == 20


async def test_keys_are_held_by_their_sha256_only():
    keys = ClientKeys(10, clock=Clock())
    key, grant = await keys.mint(60)
    assert list(keys._keys) == [hashlib.sha256(key.encode()).digest()]
    assert keys._keys[hashlib.sha256(key.encode()).digest()] is grant


async def test_expiry_is_truncated_to_whole_seconds():
    keys = ClientKeys(10, clock=Clock(1000.9))
    _, grant = await keys.mint(30.5)
    assert grant.expires_at == 1031.0 and isinstance(grant.expires_at, float)


async def test_a_grant_without_defaults_carries_none():
    _, grant = await ClientKeys(10, clock=Clock()).mint(60)
    assert grant == Grant(expires_at=1060.0, session=None)


async def test_a_grant_is_frozen():
    _, grant = await ClientKeys(10, clock=Clock()).mint(60)
    with pytest.raises(AttributeError):
        grant.expires_at = 0  # type: ignore[misc]


async def test_a_key_is_good_until_just_before_it_expires():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = await keys.mint(10)
    clock.now = 1009.999
    await keys.check(key)
    clock.now = 1010.0
    with pytest.raises(Unauthorized, match="expired"):
        await keys.check(key)


async def test_an_expired_take_spends_the_key_all_the_same():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = await keys.mint(1)
    clock.now += 5
    with pytest.raises(Unauthorized, match="expired"):
        await keys.take(key)
    with pytest.raises(Unauthorized, match="already used"):
        await keys.take(key)
    assert len(keys) == 0


async def test_a_failed_check_keeps_an_expired_key_until_the_next_mint():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = await keys.mint(1)
    clock.now += 5
    with pytest.raises(Unauthorized):
        await keys.check(key)
    assert len(keys) == 1
    await keys.mint(60)
    assert len(keys) == 1  # the expired one was forgotten, the new one counted


async def test_a_zero_ttl_key_is_born_expired():
    keys = ClientKeys(10, clock=Clock())
    key, _ = await keys.mint(0)
    with pytest.raises(Unauthorized, match="expired"):
        await keys.take(key)


async def test_a_limit_of_zero_mints_nothing():
    with pytest.raises(TooManySessions, match="0 ephemeral keys"):
        await ClientKeys(0, clock=Clock()).mint(60)


async def test_spending_a_key_makes_room():
    keys = ClientKeys(1, clock=Clock())
    key, _ = await keys.mint(60)
    with pytest.raises(TooManySessions):
        await keys.mint(60)
    await keys.take(key)
    await keys.mint(60)


async def test_a_key_of_another_store_is_unknown():
    a, b = ClientKeys(10, clock=Clock()), ClientKeys(10, clock=Clock())
    key, _ = await a.mint(60)
    with pytest.raises(Unauthorized, match="unknown"):
        await b.take(key)
    await a.take(key)


def test_the_errors_have_their_http_statuses():
    assert Unauthorized("x").http_status == 401
    assert TooManySessions("x").http_status == 429


async def test_one_owner_holds_at_most_its_share_and_spending_or_expiry_gives_it_back() -> None:
    clock = [1000.0]
    keys = ClientKeys(max_keys=10, per_owner=2, clock=lambda: clock[0])
    a1, _ = await keys.mint(60, owner="10.0.0.1")
    await keys.mint(30, owner="10.0.0.1")
    with pytest.raises(TooManySessions):
        await keys.mint(60, owner="10.0.0.1")
    await keys.mint(60, owner="10.0.0.2")  # another client is not held up by the first
    await keys.take(a1)
    await keys.mint(60, owner="10.0.0.1")  # spending one gave its place back
    clock[0] += 31  # one of the first owner's keys expired
    await keys.mint(60, owner="10.0.0.1")
