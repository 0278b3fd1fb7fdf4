"""Telnyx's Ed25519 request signatures: ``{timestamp}|{body}`` under the account's key pair."""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from omnivox.telephony.carriers import telnyx

NOW = 1_800_000_000


def keys() -> tuple[Ed25519PrivateKey, str]:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, base64.b64encode(public).decode()


def signed(private: Ed25519PrivateKey, timestamp: int, body: bytes = b"") -> dict[str, str]:
    signature = private.sign(f"{timestamp}|".encode() + body)
    return {
        "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
        "telnyx-timestamp": str(timestamp),
    }


def test_a_fresh_signature_by_the_account_key_is_taken() -> None:
    private, public = keys()
    assert telnyx.signature_ok(public, signed(private, NOW), now=NOW)
    assert telnyx.signature_ok(public, signed(private, NOW, b'{"a":1}'), b'{"a":1}', now=NOW + 10)


def test_other_keys_bodies_stale_or_missing_headers_are_refused() -> None:
    private, public = keys()
    other, _ = keys()
    assert not telnyx.signature_ok(public, signed(other, NOW), now=NOW)
    assert not telnyx.signature_ok(public, signed(private, NOW, b"x"), b"y", now=NOW)
    assert not telnyx.signature_ok(public, signed(private, NOW), now=NOW + 301)  # a replay
    headers = signed(private, NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-timestamp": str(NOW + 1)}, now=NOW)
    assert not telnyx.signature_ok(public, {"telnyx-timestamp": str(NOW)}, now=NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-signature-ed25519": "%%%"}, now=NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-timestamp": "soon"}, now=NOW)
    assert not telnyx.signature_ok("bm90IGEga2V5", headers, now=NOW)  # a public key of 9 bytes
