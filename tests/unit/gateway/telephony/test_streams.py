"""Who may open a carrier's media stream, and the URL a carrier signed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.requests import Request

from omnivox.core.config import Settings
from omnivox.gateway.telephony.streams import (
    carrier_named,
    carrier_signs,
    public_url,
    stream_allowed,
    twilio_voice,
)
from omnivox.telephony.carriers import CARRIERS, twilio

TWILIO, TELNYX, PLIVO = CARRIERS["twilio"], CARRIERS["telnyx"], CARRIERS["plivo"]


def test_carriers_are_found_by_name_and_an_unknown_one_is_none() -> None:
    assert carrier_named("twilio") is TWILIO and carrier_named("plivo") is PLIVO
    assert carrier_named("vonage") is None and carrier_named("") is None


@pytest.mark.parametrize(
    ("public", "url", "seen"),
    [
        (None, "ws://127.0.0.1:8000/telephony/twilio/stream", "ws://127.0.0.1:8000/telephony/twilio/stream"),
        (
            "https://voice.example",
            "ws://10.0.0.5:8000/telephony/twilio/stream",
            "wss://voice.example/telephony/twilio/stream",
        ),
        (
            "http://voice.example",
            "ws://10.0.0.5:8000/telephony/twilio/stream",
            "ws://voice.example/telephony/twilio/stream",
        ),
        (
            "https://voice.example",
            "http://10.0.0.5/telephony/twilio/voice?a=1&b=2",
            "https://voice.example/telephony/twilio/voice?a=1&b=2",
        ),
        ("https://voice.example:8443", "wss://x/p", "wss://voice.example:8443/p"),
        # served under a path prefix behind a proxy that strips it: the carrier reached the prefix
        (
            "https://host.example/voice/",
            "ws://10.0.0.5:8000/telephony/twilio/stream",
            "wss://host.example/voice/telephony/twilio/stream",
        ),
        (
            "https://host.example/voice",
            "http://10.0.0.5/telephony/twilio/voice?a=1",
            "https://host.example/voice/telephony/twilio/voice?a=1",
        ),
        # a proxy that passes the prefix on: it is there once, not twice
        (
            "https://host.example/voice/",
            "http://10.0.0.5/voice/telephony/twilio/voice",
            "https://host.example/voice/telephony/twilio/voice",
        ),
        (
            "https://host.example/",
            "http://10.0.0.5/telephony/plivo/stream",
            "https://host.example/telephony/plivo/stream",
        ),
        # a prefix is a whole segment: /voicemail is not under /voice
        (
            "https://host.example/voice",
            "http://10.0.0.5/voicemail/x",
            "https://host.example/voice/voicemail/x",
        ),
    ],
)
def test_the_url_a_carrier_reached_is_on_the_public_scheme_and_host(public, url, seen) -> None:
    assert public_url(Settings(public_url=public), url) == seen


def test_a_carrier_signs_only_when_its_own_secret_is_configured() -> None:
    s = Settings(twilio_auth_token="tok")
    assert carrier_signs(s, TWILIO) and not carrier_signs(s, TELNYX) and not carrier_signs(s, PLIVO)
    s = Settings(plivo_auth_token="p")
    assert carrier_signs(s, PLIVO) and not carrier_signs(s, TWILIO)
    assert not any(carrier_signs(Settings(), c) for c in (TWILIO, TELNYX, PLIVO))


def test_without_a_carrier_secret_the_client_key_decides() -> None:
    url = "ws://gw/telephony/plivo/stream"
    assert stream_allowed(Settings(), PLIVO, url, {})  # no key at all: loopback only, anyone
    keyed = Settings(api_key="k")
    assert not stream_allowed(keyed, PLIVO, url, {})
    assert stream_allowed(keyed, PLIVO, url, {"authorization": "Bearer k"})
    assert not stream_allowed(keyed, PLIVO, url, {"authorization": "Bearer wrong"})


def test_with_twilios_token_only_its_signature_of_the_public_url_opens_a_stream() -> None:
    s = Settings(twilio_auth_token="tok", public_url="https://voice.example", api_key="k")
    local = "ws://10.0.0.5:8000/telephony/twilio/stream"
    good = twilio.signature("tok", "wss://voice.example/telephony/twilio/stream", {})
    assert stream_allowed(s, TWILIO, local, {"x-twilio-signature": good})
    signed_local = twilio.signature("tok", local, {})  # signed for a URL the carrier did not reach
    assert not stream_allowed(s, TWILIO, local, {"x-twilio-signature": signed_local})
    assert not stream_allowed(s, TWILIO, local, {})
    # the client key is no way round a carrier's signature
    assert not stream_allowed(s, TWILIO, local, {"authorization": "Bearer k"})
    assert not stream_allowed(s, TWILIO, local, {"x-twilio-signature": "é forged"})


async def _twilio_webhook(settings: Settings, form: dict[str, str], headers: dict[str, str]) -> Any:
    """``POST /telephony/twilio/voice`` as the gateway behind a proxy receives it (on 10.0.0.5)."""
    body = urlencode(form).encode()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "scheme": "http",
        "server": ("10.0.0.5", 8000),
        "path": "/telephony/twilio/voice",
        "raw_path": b"/telephony/twilio/voice",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"10.0.0.5:8000"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(body)).encode()),
            *[(k.lower().encode(), v.encode()) for k, v in headers.items()],
        ],
    }
    errors: list[str] = []
    ctx = SimpleNamespace(settings=settings, metrics=SimpleNamespace(error=errors.append))
    response = await twilio_voice(Request(scope, receive), ctx)  # type: ignore[arg-type]
    return response, errors


async def test_behind_a_prefix_twilio_signs_and_streams_to_the_prefixed_url() -> None:
    s = Settings(twilio_auth_token="tok", public_url="https://host.example/voice/")
    form = {"CallSid": "CA1", "From": "+15550001111"}
    reached = "https://host.example/voice/telephony/twilio/voice"  # what Twilio requested and signed
    response, errors = await _twilio_webhook(
        s, form, {"X-Twilio-Signature": twilio.signature("tok", reached, form)}
    )
    assert response.status_code == 200 and errors == [], response.body
    assert b'<Stream url="wss://host.example/voice/telephony/twilio/stream">' in response.body
    unprefixed = twilio.signature("tok", "https://host.example/telephony/twilio/voice", form)
    response, errors = await _twilio_webhook(s, form, {"X-Twilio-Signature": unprefixed})
    assert response.status_code == 403 and errors == ["invalid_signature"]


async def test_without_a_public_url_the_stream_is_on_the_host_the_webhook_reached() -> None:
    response, _ = await _twilio_webhook(Settings(), {"CallSid": "CA1"}, {})
    assert response.status_code == 200
    assert b'<Stream url="ws://10.0.0.5:8000/telephony/twilio/stream">' in response.body
