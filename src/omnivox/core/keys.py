"""Keys on the wire: how a request offers one, and comparing it without a timing leak.

A key travels as ``Authorization: Bearer <key>`` or, from browsers (which cannot set headers on a
WebSocket), as the subprotocol ``openai-insecure-api-key.<key>``, as the OpenAI Realtime API
accepts it; never in a query string (which ends up in access logs).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping

INSECURE_KEY = "openai-insecure-api-key."


def offered_key(headers: Mapping[str, str], subprotocols: Iterable[str] = ()) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for proto in subprotocols:
        if proto.startswith(INSECURE_KEY):
            return proto[len(INSECURE_KEY) :]
    return None


def key_matches(offered: str | None, key: str) -> bool:
    """Constant-time comparison (no timing hint of how much of a guess was right)."""
    return offered is not None and hmac.compare_digest(offered.encode(), key.encode())


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine only (what may go without a key)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer(key: str | None) -> dict[str, str]:
    """The header that offers ``key`` (none without one)."""
    return {"Authorization": f"Bearer {key}"} if key else {}
