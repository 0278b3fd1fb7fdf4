"""Standard Webhooks signatures (standardwebhooks.com), as OpenAI signs its webhooks.

A webhook carries ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``:
``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` under the secret (``whsec_``
and base64 key bytes; a secret without the prefix is used as it is).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time

TOLERANCE_S = 300


def _key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            pass
    return secret.encode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def sign(secret: str, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers that sign ``body``."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature(secret, msg_id, ts, body),
    }


def verify(secret: str, headers: dict[str, str], body: bytes, now: float | None = None) -> bool:
    """Whether ``headers`` sign ``body`` under ``secret``, within the timestamp tolerance."""
    msg_id, ts, sigs = (headers.get(k) for k in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts and sigs) or not (ts.isascii() and ts.isdigit()):  # "²" is a digit to isdigit
        return False
    if abs((time.time() if now is None else now) - int(ts)) > TOLERANCE_S:
        return False
    expected = signature(secret, msg_id, int(ts), body)
    return any(hmac.compare_digest(expected.encode(), s.encode()) for s in sigs.split())
