"""Which agent profile a phone call gets, and the frames its session starts with."""

from __future__ import annotations

import json

from omnivox.core.config import PhoneProfile, Settings
from omnivox.gateway.telephony.profiles import greeting_instructions, opening, profile_for
from omnivox.protocol.realtime.phone import REALTIME_PHONE


def _settings(**profiles: PhoneProfile) -> Settings:
    return Settings(phone_profiles=profiles)


def test_the_dialled_number_picks_its_profile_with_or_without_a_plus() -> None:
    sales, default = PhoneProfile(instructions="sales"), PhoneProfile(instructions="default")
    s = _settings(**{"15550001": sales, "default": default})
    assert profile_for(s, "15550001") is sales
    assert profile_for(s, "+15550001") is sales  # a carrier's To in E.164
    assert profile_for(s, "15550002") is default


def test_a_profile_keyed_with_a_plus_matches_the_number_as_dialled() -> None:
    plus = PhoneProfile(instructions="plus")
    assert profile_for(_settings(**{"+4420": plus}), "+4420") is plus


def test_no_number_or_no_match_without_a_default_gives_a_fresh_default_profile() -> None:
    s = _settings(**{"123": PhoneProfile(instructions="x")})
    for number in (None, "", "999"):
        got = profile_for(s, number)
        assert got == PhoneProfile() and got.greeting is None and got.end_call is True


def test_the_greeting_is_quoted_into_the_first_replys_instructions() -> None:
    text = greeting_instructions("Hello, this is Ada.")
    assert text.endswith('"Hello, this is Ada."') and "Greet the caller" in text


def test_every_calls_session_opens_on_a_phone_line() -> None:
    # SIP (inbound, dialled out, accepted with an application's session) and the carriers' media
    # streams all open their session here: the judge of speech over a reply then never weighs the
    # backchannel witness (omnivox.line; agent.interruption.Line)
    profile = PhoneProfile(instructions="desk", greeting="Hello.")
    for session in (None, {"type": "realtime", "omnivox": {"line": "wideband", "echo_guard": False}}):
        frames = opening(REALTIME_PHONE, profile, "audio/pcmu", session, keypad=True)
        update = json.loads(frames[0])
        assert update["type"] == "session.update" and update["session"]["omnivox"]["line"] == "phone"
        assert len(frames) == 2  # and the greeting
