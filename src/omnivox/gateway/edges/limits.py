"""Per-client limits at the edge: how many connections one address holds, and how fast it opens them.

One client must not be able to fill the whole queue or starve the gateway: each address may hold at
most ``max_sessions_per_client`` connections and open new ones at ``client_connect_rate`` per second
(a token bucket holding ``client_connect_burst``). A refused connection gets ``too_many_sessions``
and close 1008; it never takes a place in the queue.

These are one gateway's counts; gateways sharing a store count together (``cluster.limits``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from omnivox.core.errors import TooManySessions

_IDLE_BUCKETS = 10_000  # buckets kept before full ones are forgotten


def count_down(open_: dict[str, int], client: str) -> None:
    """One connection of ``client`` ended (a count reaching 0 is forgotten)."""
    left = open_[client] - 1
    if left:
        open_[client] = left
    else:
        del open_[client]


class Limits(Protocol):
    """Per-client limits, one gateway's (``ClientLimits``) or every gateway's on a shared store."""

    def hold(self, client: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one connection of ``client`` for the block; raises ``TooManySessions`` (or
        ``StoreUnavailable``) instead."""
        ...


@dataclass
class _Bucket:
    tokens: float
    at: float


class ClientLimits:
    def __init__(
        self,
        max_sessions: int,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions  # 0: no limit
        self.rate = rate  # 0: no limit
        self.burst = burst
        self.clock = clock
        self.open: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}

    @contextlib.asynccontextmanager
    async def hold(self, client: str) -> AsyncIterator[None]:
        """``admit``, as every gateway's limits are held (the shared ones await the store)."""
        with self.admit(client):
            yield

    @contextlib.contextmanager
    def admit(self, client: str) -> Iterator[None]:
        """Hold one connection of ``client`` for the block; raises ``TooManySessions`` instead."""
        self._take_token(client)
        held = self.open.get(client, 0)
        if self.max_sessions and held >= self.max_sessions:
            raise TooManySessions(
                f"this client already holds {held} connections (the limit is {self.max_sessions})",
                limit=self.max_sessions,
            )
        self.open[client] = held + 1
        try:
            yield
        finally:
            count_down(self.open, client)

    def _take_token(self, client: str) -> None:
        if not self.rate:
            return
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= _IDLE_BUCKETS:
                self._forget_full(now)
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens < 1:
            raise TooManySessions(
                f"too many new connections from this client (at most {self.rate:g} per second)",
                rate=self.rate,
            )
        bucket.tokens -= 1

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: they say nothing a new bucket would not."""
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.at) * self.rate >= self.burst]
        for k in full:
            del self._buckets[k]


class HeldBytes:
    """What clients waiting for a worker may have the gateway hold for them, all together: each
    session holds up to its protocol's bound (``realtime_queued_bytes``...), and all of them at most
    ``limit`` (``queued_bytes_total``), so a thousand waiting clients cannot each park megabytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> bool:
        if self.held + n > self.limit:
            return False
        self.held += n
        return True

    def give(self, n: int) -> None:
        self.held = max(0, self.held - n)
