"""Per-client limits: connections held at once, and the rate new ones may open at."""

from __future__ import annotations

import pytest

from omnivox.core.errors import TooManySessions
from omnivox.gateway.edges.limits import ClientLimits


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_client_holds_at_most_its_share_and_gets_room_back_when_one_ends() -> None:
    limits = ClientLimits(max_sessions=2, rate=0, burst=1)
    with limits.admit("a"), limits.admit("a"):
        with pytest.raises(TooManySessions), limits.admit("a"):
            pass
        with limits.admit("b"):  # another address is not affected
            assert limits.open == {"a": 2, "b": 1}
    assert limits.open == {}
    with limits.admit("a"):
        pass


def test_a_refused_connection_holds_nothing() -> None:
    limits = ClientLimits(max_sessions=1, rate=0, burst=1)
    with limits.admit("a"):
        for _ in range(3):
            with pytest.raises(TooManySessions), limits.admit("a"):
                pass
        assert limits.open == {"a": 1}


def test_new_connections_beyond_the_burst_wait_for_the_rate() -> None:
    clock = Clock()
    limits = ClientLimits(max_sessions=0, rate=2.0, burst=3, clock=clock)
    for _ in range(3):
        with limits.admit("a"):
            pass
    with pytest.raises(TooManySessions, match="per second"), limits.admit("a"):
        pass
    clock.now += 0.5  # one token back at 2 per second
    with limits.admit("a"):
        pass
    with pytest.raises(TooManySessions), limits.admit("a"):
        pass


def test_zero_means_no_limit() -> None:
    limits = ClientLimits(max_sessions=0, rate=0, burst=1)
    held = [limits.admit("a") for _ in range(1000)]
    for h in held:
        h.__enter__()
    assert limits.open["a"] == 1000


def test_buckets_of_idle_clients_are_forgotten() -> None:
    clock = Clock()
    limits = ClientLimits(max_sessions=0, rate=1.0, burst=1, clock=clock)
    for i in range(10_000):
        with limits.admit(f"c{i}"):
            pass
    clock.now += 5  # all refilled
    with limits.admit("new"):
        pass
    assert len(limits._buckets) == 1


def test_waiting_sessions_hold_at_most_the_total_together() -> None:
    from omnivox.gateway.edges.limits import HeldBytes

    held = HeldBytes(10)
    assert held.take(6) and not held.take(5) and held.take(4)
    held.give(6)
    assert held.held == 4 and held.take(6) and not held.take(1)
    held.give(100)  # never below nothing
    assert held.held == 0
