"""A gateway on a shared store gets the shared versions of what a client may meet on any gateway:
ephemeral keys, per-client limits, the WebRTC call directory, and the media-token secret."""

from __future__ import annotations

import secrets

from omnivox.gateway.cluster.client_keys import RedisClientKeys
from omnivox.gateway.cluster.limits import RedisClientLimits
from omnivox.gateway.cluster.peers import RedisPeers
from omnivox.gateway.cluster.scheduler import RedisStore
from omnivox.gateway.context import GatewayContext


def share(ctx: GatewayContext, store: RedisStore) -> None:
    """Put ``ctx``'s keys, limits and call directory on ``store``."""
    s = ctx.settings
    ctx.client_keys = RedisClientKeys(store, s.client_secrets_max, s.client_secrets_per_client)
    ctx.limits = RedisClientLimits(
        store, s.max_sessions_per_client, s.client_connect_rate, s.client_connect_burst
    )
    peers = RedisPeers(store, lambda: list(ctx.calls.calls))
    ctx.peers = peers
    ctx.calls.on_change = lambda call_id, held: (peers.call_started if held else peers.call_ended)(call_id)


async def media_secret(store: RedisStore) -> bytes:
    """The secret every gateway on ``store`` signs media links with (the first gateway's)."""
    return bytes.fromhex(await store.call("media_secret", secrets.token_hex(32)))
