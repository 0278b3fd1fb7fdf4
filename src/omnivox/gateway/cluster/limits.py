"""Per-client limits across gateways: the connections one address holds on all of them together,
and the rate it opens new ones at (one token bucket in the store, whichever gateway it reaches).

Each gateway keeps its own counts in the store (``{ovx}:open:<address>``: gateway -> connections),
so a gateway that dies takes its share with it when it is reaped, and after the store lost its
state each gateway puts its share back. The store unreachable: a new connection is refused with
``service_unavailable`` (fail closed); one ending is counted down once the store answers again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from omnivox.core.errors import TooManySessions
from omnivox.gateway.cluster.scheduler import RedisStore
from omnivox.gateway.edges.limits import count_down


class RedisClientLimits:
    def __init__(self, store: RedisStore, max_sessions: int, rate: float, burst: int) -> None:
        self.store = store
        self.max_sessions = max_sessions  # 0: no limit
        self.rate = rate  # 0: no limit
        self.burst = burst
        self.open: dict[str, int] = {}  # this gateway's share, by address
        store.beat_hooks.append(self._after_beat)

    @contextlib.asynccontextmanager
    async def hold(self, client: str) -> AsyncIterator[None]:
        """Hold one connection of ``client`` for the block; raises ``TooManySessions`` instead."""
        store = self.store
        said = await store.call(
            "admit_client", client, store.gateway_id, self.max_sessions, self.rate, self.burst
        )
        if said == "rate":
            raise TooManySessions(
                f"too many new connections from this client (at most {self.rate:g} per second)",
                rate=self.rate,
            )
        if said.startswith("held:"):
            held = int(said.split(":", 1)[1])
            raise TooManySessions(
                f"this client already holds {held} connections (the limit is {self.max_sessions})",
                limit=self.max_sessions,
            )
        self.open[client] = self.open.get(client, 0) + 1
        try:
            yield
        finally:
            count_down(self.open, client)
            await store.pending.run("leave_client", client, store.gateway_id)

    async def _after_beat(self, lost: bool) -> None:
        if lost and self.open:
            pairs: list[str | int] = []
            for client, n in self.open.items():
                pairs += [client, n]
            await self.store.call("reassert_clients", self.store.gateway_id, *pairs)
