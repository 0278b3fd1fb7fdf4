"""Plivo's V3 request signatures: HMAC-SHA256 of ``{url}.{nonce}`` under the auth token."""

from __future__ import annotations

import base64
import hashlib
import hmac

from omnivox.telephony.carriers import plivo

TOKEN = "MAauthtoken"


def mac(data: str, token: str = TOKEN) -> str:
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha256).digest()).decode()


def test_what_is_signed_follows_plivos_sdk() -> None:
    assert plivo.signed_url("GET", "wss://h.example/telephony/plivo/stream") == (
        "wss://h.example/telephony/plivo/stream"
    )
    assert plivo.signed_url("GET", "https://h/p?b=2&a=1&a=0") == "https://h/p?a=0&a=1&b=2"
    assert plivo.signed_url("POST", "https://h/p", {"To": "1", "From": "2"}) == "https://h/p?From2To1"
    assert plivo.signed_url("POST", "https://h/p?x=1", {"To": "1"}) == "https://h/p?x=1.To1"
    assert plivo.signed_url("POST", "https://h/p") == "https://h/p"


def test_a_signed_handshake_is_taken_and_anything_else_refused() -> None:
    url = "wss://h.example/telephony/plivo/stream"
    good = {"x-plivo-signature-v3": mac(f"{url}.n1"), "x-plivo-signature-v3-nonce": "n1"}
    assert plivo.signature_ok(TOKEN, "GET", url, good)
    rotating = {**good, "x-plivo-signature-v3": f"{mac(f'{url}.n1', 'old')}, {mac(f'{url}.n1')}"}
    assert plivo.signature_ok(TOKEN, "GET", url, rotating)
    assert not plivo.signature_ok("other", "GET", url, good)
    assert not plivo.signature_ok(TOKEN, "GET", url + "x", good)
    assert not plivo.signature_ok(TOKEN, "GET", url, {**good, "x-plivo-signature-v3-nonce": "n2"})
    assert not plivo.signature_ok(TOKEN, "GET", url, {"x-plivo-signature-v3": good["x-plivo-signature-v3"]})
    assert not plivo.signature_ok(TOKEN, "GET", url, {})
