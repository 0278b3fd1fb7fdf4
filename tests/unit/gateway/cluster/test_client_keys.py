"""Ephemeral client keys on the store, over a stand-in for its scripts (a mock: the real scripts run
against redis-server in test_shared.py): what is sent, what each refusal says, and how a stored body
reads back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnivox.core.errors import TooManySessions, Unauthorized
from omnivox.gateway.cluster.client_keys import RedisClientKeys
from omnivox.gateway.edges.client_keys import EXPIRED, UNKNOWN, digest, is_ephemeral


class _Client:
    def __init__(self, store: FakeStore) -> None:
        self.store = store

    async def get(self, name: str) -> Any:
        self.store.gets.append(name)
        return self.store.bodies.get(name.rsplit(":", 1)[1])


class FakeStore:
    """Mock of ``RedisStore``: ``mint_key`` answers ``said`` and keeps the body; ``take_key`` pops it."""

    prefix = "{ovx}"

    def __init__(self, said: str = "ok") -> None:
        self.said = said
        self.bodies: dict[str, str] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.gets: list[str] = []
        self.client = _Client(self)

    async def call(self, op: str, *args: Any) -> Any:
        self.calls.append((op, *args))
        if op == "mint_key":
            if self.said == "ok":
                self.bodies[args[0]] = args[1]
            return self.said
        if op == "take_key":
            return self.bodies.pop(args[0], None)
        raise AssertionError(op)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _keys(said: str = "ok", now: float = 1000.25) -> tuple[RedisClientKeys, FakeStore, Clock]:
    store, clock = FakeStore(said), Clock(now)
    return RedisClientKeys(store, max_keys=4, per_owner=2, clock=clock), store, clock  # type: ignore[arg-type]


async def test_a_minted_key_is_held_by_its_digest_for_whole_seconds_and_spent_once() -> None:
    keys, store, _ = _keys()
    key, grant = await keys.mint(60, {"voice": "x"}, owner="1.2.3.4")
    assert is_ephemeral(key) and grant.expires_at == 1060.0 and grant.owner == "1.2.3.4"
    op, hashed, body, ttl_ms, max_keys, owner, per_owner = store.calls[0]
    assert (op, hashed, max_keys, owner, per_owner) == ("mint_key", digest(key).hex(), 4, "1.2.3.4", 2)
    assert key not in json.dumps(store.calls)  # the key itself never reaches the store
    assert ttl_ms == 59750  # until the whole second it expires at
    assert json.loads(body) == {"expires_at": 1060.0, "session": {"voice": "x"}, "owner": "1.2.3.4"}
    await keys.check(key)  # does not spend it
    assert store.gets == [f"{{ovx}}:ek:{digest(key).hex()}"]
    taken = await keys.take(key)
    assert taken == grant
    with pytest.raises(Unauthorized) as again:
        await keys.take(key)
    assert again.value.message == UNKNOWN


async def test_without_an_owner_per_owner_is_the_whole_limit() -> None:
    store = FakeStore()
    assert RedisClientKeys(store, max_keys=7).per_owner == 7  # type: ignore[arg-type]


async def test_an_expired_key_says_so_on_check_and_take() -> None:
    keys, _, clock = _keys()
    key, _ = await keys.mint(10)
    clock.now = 1010.0  # its whole second
    with pytest.raises(Unauthorized) as checked:
        await keys.check(key)
    assert checked.value.message == EXPIRED
    with pytest.raises(Unauthorized) as taken:
        await keys.take(key)
    assert taken.value.message == EXPIRED


async def test_an_unknown_key_is_unknown() -> None:
    keys, _, _ = _keys()
    with pytest.raises(Unauthorized) as checked:
        await keys.check("ek_never")
    assert checked.value.message == UNKNOWN


@pytest.mark.parametrize(("said", "says"), [("full", "4 ephemeral keys"), ("owner_full", "holds 2 unused")])
async def test_a_full_store_refuses_a_new_key(said, says) -> None:
    keys, store, _ = _keys(said)
    with pytest.raises(TooManySessions) as refused:
        await keys.mint(60, owner="o")
    assert says in refused.value.message and store.bodies == {}


async def test_the_stores_ttl_is_never_zero_or_negative() -> None:
    keys, store, _ = _keys(now=1000.9)
    _, grant = await keys.mint(0.05)  # truncated to the whole second: already past
    assert grant.expires_at == 1000.0 and store.calls[0][3] == 1


async def test_a_stored_body_without_an_owner_or_session_reads_as_none_and_empty() -> None:
    keys, store, _ = _keys()
    key = "ek_old"
    store.bodies[digest(key).hex()] = json.dumps({"expires_at": 2000})
    grant = await keys.take(key)
    assert (grant.expires_at, grant.session, grant.owner) == (2000.0, None, "")
