"""The client key on WebSocket edges: ``Authorization: Bearer`` or, from browsers (which cannot set
headers), the subprotocol ``openai-insecure-api-key.<key>``, as the OpenAI Realtime API accepts it."""

from __future__ import annotations

import hmac
from typing import Any

INSECURE_KEY = "openai-insecure-api-key."


def offered_key(ws: Any) -> str | None:
    auth = ws.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for proto in ws.scope.get("subprotocols", []):
        if proto.startswith(INSECURE_KEY):
            return proto[len(INSECURE_KEY) :]
    return ws.query_params.get("api_key")


def key_matches(offered: str | None, key: str) -> bool:
    """Constant-time comparison (no timing hint of how much of a guess was right)."""
    return offered is not None and hmac.compare_digest(offered.encode(), key.encode())
