"""What a dial request may say, where it goes, and what each final answer means."""

from __future__ import annotations

import pytest

from omnivox.core.config import PhoneProfile, Settings
from omnivox.core.errors import DialFailed, InvalidMessage
from omnivox.gateway.telephony.dial import DialOutcome, DialRequest, outcome_of, resolve
from omnivox.protocol.realtime.wire import REALTIME


def settings(**extra: object) -> Settings:
    profiles = {"default": PhoneProfile(), "sales": PhoneProfile(greeting="Hi!")}
    return Settings(phone_profiles=profiles, **extra)  # type: ignore[arg-type]


def test_a_request_takes_a_uri_or_a_trunked_number_and_a_profile() -> None:
    r = DialRequest.parse({"to": "sip:bob@127.0.0.1:5070", "profile": "sales"}, settings(), REALTIME)
    assert (r.to, r.caller, r.profile.greeting, r.wait, r.timeout_s) == (
        "sip:bob@127.0.0.1:5070",
        "omnivox",
        "Hi!",
        True,
        30.0,
    )
    r = DialRequest.parse(
        {
            "to": "+15550001111",
            "from": "+15550002222",
            "session": {"type": "realtime", "instructions": "x"},
            "wait": False,
        },
        settings(sip_trunk="sip:sip.example.com"),
        REALTIME,
    )
    assert r.session == {"instructions": "x"} and not r.wait and r.caller == "+15550002222"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "to"),
        ({"to": "+15550001111"}, "to"),  # no trunk for numbers
        ({"to": "sips:bob@host"}, "to"),
        ({"to": "sip:bob@host\r\nX: y"}, "to"),
        ({"to": "sip:bob@host", "from": "<evil>"}, "from"),
        ({"to": "sip:bob@host", "profile": "nope"}, "profile"),
        ({"to": "sip:bob@host", "timeout_s": 0.5}, "timeout_s"),
        ({"to": "sip:bob@host", "timeout_s": True}, "timeout_s"),
        ({"to": "sip:bob@host", "wait": "yes"}, "wait"),
        ({"to": "sip:bob@host", "session": []}, "session"),
    ],
)
def test_bad_requests_name_their_field(body: dict, param: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        DialRequest.parse(body, settings(), REALTIME)
    assert err.value.details["param"] == param


def test_final_answers_map_to_outcomes() -> None:
    assert [outcome_of(s) for s in (486, 600, 480, 408, 487, 403, 603, 404, 488, 500)] == [
        DialOutcome.BUSY,
        DialOutcome.BUSY,
        DialOutcome.NO_ANSWER,
        DialOutcome.NO_ANSWER,
        DialOutcome.NO_ANSWER,
        *[DialOutcome.REJECTED] * 5,
    ]


async def test_numbers_go_to_the_trunk_and_uris_to_their_host() -> None:
    trunked = await resolve("+15550001111", settings(sip_trunk="sip:127.0.0.1:5080"))
    assert (trunked.uri, trunked.addr, trunked.trunk) == (
        "sip:+15550001111@127.0.0.1:5080",
        ("127.0.0.1", 5080),
        True,
    )
    direct = await resolve("sip:bob@127.0.0.1", settings())
    assert (direct.uri, direct.addr, direct.trunk) == ("sip:bob@127.0.0.1", ("127.0.0.1", 5060), False)
    with pytest.raises(DialFailed) as err:
        await resolve("sip:bob@nowhere.invalid", settings())
    assert err.value.details["outcome"] == "unreachable"
