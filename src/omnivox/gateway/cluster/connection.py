"""Connecting to the store: ``redis://``, ``rediss://`` (TLS), ``unix://`` and ``redis+sentinel://``
URLs, and what a failure to reach it becomes (``StoreUnavailable``, never a bare Redis error).

Commands are never retried by the client library: an operation that timed out may have run, and
running it twice is not always harmless (the operations are written to be retried by their callers
where that is safe, e.g. a release, guarded by its ticket).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from omnivox.core.errors import StoreUnavailable

try:  # an optional dependency: `pip install omnivox[redis]`
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.asyncio.sentinel import Sentinel
    from redis.backoff import NoBackoff
    from redis.exceptions import BusyLoadingError, ReadOnlyError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    UNREACHABLE: tuple[type[BaseException], ...] = (
        RedisConnectionError,  # refused, reset, no sentinel knows a primary
        RedisTimeoutError,
        BusyLoadingError,  # a restarted server still loading its data
        ReadOnlyError,  # a replica that was the primary before a failover
        OSError,
    )
except ImportError:  # pragma: no cover - depends on the installed extras
    aioredis = None  # type: ignore[assignment]
    RedisConnectionError = OSError  # type: ignore[misc,assignment]
    UNREACHABLE = (OSError,)

MEMORY = "memory"
MAX_CONNECTIONS = 32  # per gateway
SCHEMES = ("redis", "rediss", "unix", "redis+sentinel")


@dataclass(frozen=True)
class StoreUrl:
    """A parsed store URL; ``redacted`` is what may be shown (no password)."""

    raw: str
    scheme: str
    redacted: str

    @property
    def is_memory(self) -> bool:
        return self.scheme == MEMORY


def parse_store_url(url: str | None) -> StoreUrl:
    """``memory`` (or nothing) or a Redis URL; raises ``ValueError`` for anything else."""
    if not url or url == MEMORY:
        return StoreUrl(MEMORY, MEMORY, MEMORY)
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"a store URL is memory or {', '.join(s + '://' for s in SCHEMES)}, not {url!r}")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return StoreUrl(url, parts.scheme, f"{parts.scheme}://{netloc}{parts.path}")


def connect(url: StoreUrl, *, timeout_s: float = 2.0) -> aioredis.Redis:
    """A client for the store (connections are opened lazily, on first use)."""
    if aioredis is None:
        raise SystemExit("omnivox: a redis:// store needs the redis package: pip install 'omnivox[redis]'")
    options = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": True,
        "encoding_errors": "surrogateescape",  # a packed (binary) reply comes back intact
    }
    if url.scheme != "redis+sentinel":
        # a bounded pool that makes a burst wait for a connection (thousands of clients arriving at
        # once would otherwise open as many connections, or fail past the library's 100)
        pool = aioredis.BlockingConnectionPool.from_url(
            url.raw, max_connections=MAX_CONNECTIONS, timeout=timeout_s, **options
        )
        return aioredis.Redis(connection_pool=pool)
    # redis+sentinel://[:password@]host:port[,host:port...]/service[/db]
    parts = urlsplit(url.raw)
    password = unquote(parts.password) if parts.password else None
    hosts = []
    for item in parts.netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = item.rpartition(":")
        hosts.append((host or item, int(port) if port.isdigit() else 26379))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a sentinel URL names its service: redis+sentinel://host:26379/mymaster")
    db = int(path[1]) if len(path) > 1 else 0
    query = parse_qs(parts.query)
    sentinel = Sentinel(
        hosts,
        sentinel_kwargs={"password": query.get("sentinel_password", [None])[0], **options},
        password=password,
        db=db,
        **options,
    )
    return sentinel.master_for(path[0], max_connections=MAX_CONNECTIONS * 4)


@contextlib.asynccontextmanager
async def reaching(what: str) -> AsyncIterator[None]:
    """Turn the store's connection failures into ``StoreUnavailable`` (with what was being done);
    anything else (a script's own error) is a bug and stays what it is."""
    try:
        yield
    except UNREACHABLE as exc:
        raise StoreUnavailable(f"the scheduler store cannot be reached ({what}): {exc}") from None
