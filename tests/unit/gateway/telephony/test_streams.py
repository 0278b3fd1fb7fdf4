"""Who may open a carrier's media stream, and the URL a carrier signed."""

from __future__ import annotations

import pytest

from omnivox.core.config import Settings
from omnivox.gateway.telephony.streams import carrier_named, carrier_signs, public_url, stream_allowed
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
