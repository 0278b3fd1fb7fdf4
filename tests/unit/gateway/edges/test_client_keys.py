"""Ephemeral client keys: one session each, until they expire; held by digest."""

from __future__ import annotations

import pytest

from omnivox.core.errors import TooManySessions, Unauthorized
from omnivox.gateway.edges.client_keys import ClientKeys, is_ephemeral


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

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
