"""Per-client limits across gateways, over a stand-in for the store's scripts (a mock: the real
store's scripts are tested against redis-server in test_shared.py)."""

from __future__ import annotations

from typing import Any

import pytest

from omnivox.core.errors import TooManySessions
from omnivox.gateway.cluster.limits import RedisClientLimits


class _Pending:
    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    async def run(self, op: str, *args: Any) -> None:
        self.calls.append((op, *args))


class FakeStore:
    """Mock of ``RedisStore``: answers ``admit_client`` with ``said`` and records every call."""

    gateway_id = "gw-a"

    def __init__(self, said: str = "ok") -> None:
        self.said = said
        self.calls: list[tuple[Any, ...]] = []
        self.pending = _Pending(self.calls)
        self.beat_hooks: list[Any] = []

    async def call(self, op: str, *args: Any) -> Any:
        self.calls.append((op, *args))
        return self.said


def _limits(said: str = "ok") -> tuple[RedisClientLimits, FakeStore]:
    store = FakeStore(said)
    return RedisClientLimits(store, max_sessions=2, rate=1.5, burst=3), store  # type: ignore[arg-type]


async def test_an_admitted_client_is_counted_while_held_and_leaves_the_store_after() -> None:
    limits, store = _limits()
    async with limits.hold("10.0.0.1"):
        async with limits.hold("10.0.0.1"):
            assert limits.open == {"10.0.0.1": 2}
        assert limits.open == {"10.0.0.1": 1}
    assert limits.open == {}
    assert store.calls[0] == ("admit_client", "10.0.0.1", "gw-a", 2, 1.5, 3)
    assert store.calls[-2:] == [("leave_client", "10.0.0.1", "gw-a")] * 2


async def test_a_client_leaves_even_when_its_block_raises() -> None:
    limits, store = _limits()
    with pytest.raises(RuntimeError):
        async with limits.hold("c"):
            raise RuntimeError("session failed")
    assert limits.open == {} and store.calls[-1] == ("leave_client", "c", "gw-a")


@pytest.mark.parametrize(
    ("said", "details", "says"),
    [("rate", {"rate": 1.5}, "1.5 per second"), ("held:5", {"limit": 2}, "holds 5 connections")],
)
async def test_a_client_opening_too_fast_or_holding_too_many_is_refused_saying_which(
    said, details, says
) -> None:
    limits, store = _limits(said)
    with pytest.raises(TooManySessions) as refused:
        async with limits.hold("c"):
            pytest.fail("admitted")
    assert refused.value.details == details and says in refused.value.message
    assert limits.open == {} and [c[0] for c in store.calls] == ["admit_client"]  # nothing to leave


async def test_after_the_store_lost_its_state_this_gateways_share_is_put_back() -> None:
    limits, store = _limits()
    assert store.beat_hooks == [limits._after_beat]
    await limits._after_beat(True)  # nothing held: nothing to say
    assert store.calls == []
    async with limits.hold("a"), limits.hold("a"), limits.hold("b"):
        store.calls.clear()
        await limits._after_beat(False)  # not lost: nothing to say
        assert store.calls == []
        await limits._after_beat(True)
        assert store.calls == [("reassert_clients", "gw-a", "a", 2, "b", 1)]
