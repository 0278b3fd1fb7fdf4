"""Ephemeral client keys: minted with the long-lived client key, each opens exactly one session.

A browser should never hold ``OMNIVOX_API_KEY``: a server that has it mints a short-lived key
(``POST /v1/realtime/client_secrets``) and hands that to the page. Such a key (``ek_`` + 32 random
bytes) is good for one session, WebSocket or WebRTC, until it expires; taking it for a session spends
it. It may carry session defaults, which the session applies before the client's first event.

Keys live in the gateway's memory (a restart forgets them, as it forgets the sessions), or, with
gateways sharing a store, in the store (``cluster.client_keys``: minted on one gateway, spent once on
any). Either way they are held by their SHA-256, so a lookup leaks nothing of a guess and a dump no
usable key.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from omnivox.core.errors import TooManySessions, Unauthorized

PREFIX = "ek_"


@dataclass(frozen=True)
class Grant:
    """What a spent key gives its session."""

    expires_at: float  # unix time
    session: dict[str, Any] | None  # the defaults it was minted with (the protocol's session patch)
    owner: str = ""  # who minted it (the client's address): at most ``per_owner`` each


def is_ephemeral(key: str | None) -> bool:
    return key is not None and key.startswith(PREFIX)


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


UNKNOWN = "this ephemeral key is unknown or was already used (a key opens one session)"
EXPIRED = "this ephemeral key has expired"


class KeyStore(Protocol):
    """Where ephemeral keys are: one gateway's memory (``ClientKeys``), or a store gateways share."""

    async def mint(
        self, ttl_s: float, session: dict[str, Any] | None = None, owner: str = ""
    ) -> tuple[str, Grant]: ...

    async def check(self, key: str) -> None: ...

    async def take(self, key: str) -> Grant: ...


class ClientKeys:
    def __init__(
        self, max_keys: int, per_owner: int | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.max_keys = max_keys
        self.per_owner = per_owner or max_keys
        self.clock = clock
        self._keys: dict[bytes, Grant] = {}
        self._owned: Counter[str] = Counter()  # outstanding keys per owner

    def __len__(self) -> int:
        return len(self._keys)

    async def mint(
        self, ttl_s: float, session: dict[str, Any] | None = None, owner: str = ""
    ) -> tuple[str, Grant]:
        """A new key good for ``ttl_s`` seconds; raises ``TooManySessions`` past ``max_keys`` in all,
        or past ``per_owner`` for ``owner`` (one client cannot take every slot)."""
        self._forget_expired()
        if len(self._keys) >= self.max_keys:
            raise TooManySessions(f"{self.max_keys} ephemeral keys are outstanding; try again later")
        if self._owned[owner] >= self.per_owner:
            raise TooManySessions(f"this client holds {self.per_owner} unused ephemeral keys, its limit")
        key = new_key()
        grant = Grant(expires_at=float(int(self.clock() + ttl_s)), session=session, owner=owner)  # whole s
        self._keys[digest(key)] = grant
        self._owned[owner] += 1
        return key, grant

    async def check(self, key: str) -> None:
        """Raise ``Unauthorized`` as ``take`` would, without spending the key."""
        check_grant(self._keys.get(digest(key)), self.clock())

    async def take(self, key: str) -> Grant:
        """Spend ``key`` on a session. Raises ``Unauthorized`` for a key never minted, already spent
        or expired (each said as such)."""
        grant = self._keys.pop(digest(key), None)
        if grant is not None:
            self._disown(grant)
        return check_grant(grant, self.clock())

    def _forget_expired(self) -> None:
        now = self.clock()
        for d in [d for d, g in self._keys.items() if g.expires_at <= now]:
            self._disown(self._keys.pop(d))

    def _disown(self, grant: Grant) -> None:
        self._owned[grant.owner] -= 1
        if self._owned[grant.owner] <= 0:
            del self._owned[grant.owner]


def check_grant(grant: Grant | None, now: float) -> Grant:
    """The grant of a key, or ``Unauthorized`` saying why not."""
    if grant is None:
        raise Unauthorized(UNKNOWN)
    if grant.expires_at <= now:
        raise Unauthorized(EXPIRED)
    return grant
