"""The other gateways on the store: the WebRTC call directory (``{ovx}:call:<id>`` -> the gateway
holding the call, a lease renewed every beat while the call lasts) and the live gateways'
addresses (each advertises one, ``advertise_url``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from typing import Any

from omnivox.core.errors import StoreUnavailable
from omnivox.gateway.cluster.scheduler import RedisStore


class RedisPeers:
    def __init__(self, store: RedisStore, held_calls: Callable[[], Iterable[str]]) -> None:
        self.store = store
        self.held_calls = held_calls  # the ids of the calls this gateway holds now
        self._tasks: set[asyncio.Task[Any]] = set()
        store.beat_hooks.append(self._renew)

    @property
    def ttl_ms(self) -> int:
        return round(self.store.lease_s * 3000)  # three beats' grace

    async def call_owner(self, call_id: str) -> str | None:
        found = await self.store.call("find_call", call_id)
        if not found or found[0] == self.store.gateway_id:
            return None
        return json.loads(found[1]).get("url")

    def call_started(self, call_id: str) -> None:
        self._spawn(self.store.pending.run("hold_calls", self.store.gateway_id, self.ttl_ms, call_id))

    def call_ended(self, call_id: str) -> None:
        self._spawn(self.store.pending.run("drop_call", call_id, self.store.gateway_id))

    async def others(self) -> list[tuple[str, str]]:
        try:
            _now, live = await self.store.call("gateways")
        except StoreUnavailable:
            return []
        return [
            (gw, url)
            for gw, _expiry, info in live
            if gw != self.store.gateway_id and (url := json.loads(info).get("url"))
        ]

    async def _renew(self, lost: bool) -> None:
        calls = list(self.held_calls())
        if calls:
            await self.store.call("hold_calls", self.store.gateway_id, self.ttl_ms, *calls)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
