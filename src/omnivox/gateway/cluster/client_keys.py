"""Ephemeral client keys on the store: minted on one gateway, spent once on any (``GETDEL``-like,
in one script step), each gone from the store when it expires. Held by their SHA-256, as in memory.

The store unreachable: minting and spending fail with ``service_unavailable`` (fail closed: a key is
never taken on a guess)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from omnivox.core.errors import TooManySessions
from omnivox.gateway.cluster.scheduler import RedisStore
from omnivox.gateway.edges.client_keys import Grant, check_grant, digest, new_key


class RedisClientKeys:
    def __init__(
        self,
        store: RedisStore,
        max_keys: int,
        per_owner: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.max_keys = max_keys
        self.per_owner = per_owner or max_keys
        self.clock = clock

    async def mint(
        self, ttl_s: float, session: dict[str, Any] | None = None, owner: str = ""
    ) -> tuple[str, Grant]:
        key = new_key()
        grant = Grant(expires_at=float(int(self.clock() + ttl_s)), session=session, owner=owner)
        body = json.dumps({"expires_at": grant.expires_at, "session": session, "owner": owner})
        ttl_ms = max(1, round((grant.expires_at - self.clock()) * 1000))
        said = await self.store.call(
            "mint_key", digest(key).hex(), body, ttl_ms, self.max_keys, owner, self.per_owner
        )
        if said == "full":
            raise TooManySessions(f"{self.max_keys} ephemeral keys are outstanding; try again later")
        if said == "owner_full":
            raise TooManySessions(f"this client holds {self.per_owner} unused ephemeral keys, its limit")
        return key, grant

    async def check(self, key: str) -> None:
        stored: Any = await self.store.client.get(f"{self.store.prefix}:ek:{digest(key).hex()}")
        check_grant(_grant(stored), self.clock())

    async def take(self, key: str) -> Grant:
        return check_grant(_grant(await self.store.call("take_key", digest(key).hex())), self.clock())


def _grant(body: str | None) -> Grant | None:
    if not body:
        return None
    data = json.loads(body)
    return Grant(
        expires_at=float(data["expires_at"]), session=data.get("session"), owner=data.get("owner", "")
    )
