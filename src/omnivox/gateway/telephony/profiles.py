"""How a phone call's session starts: the agent profile for the dialled number (or ``default``),
or the session an application gave when it accepted the call, plus a greeting when the profile
says the agent speaks first."""

from __future__ import annotations

from typing import Any

from omnivox.core.config import PhoneProfile, Settings
from omnivox.protocol.phone import PhoneBridge


def profile_for(settings: Settings, number: str | None) -> PhoneProfile:
    """The profile of the dialled number (its user part, or a carrier's To), else ``default``."""
    profiles = settings.phone_profiles
    if number:
        for key in (number, number.lstrip("+")):
            if key in profiles:
                return profiles[key]
    return profiles.get("default") or PhoneProfile()


def greeting_instructions(greeting: str) -> str:
    return f'The phone call has just connected. Greet the caller by saying: "{greeting}"'


def opening(
    bridge: PhoneBridge,
    profile: PhoneProfile,
    encoding: str,
    session: dict[str, Any] | None = None,
    *,
    keypad: bool = False,
) -> list[str]:
    """The frames a call's session gets first: its set-up, then the greeting if there is one.
    ``keypad``: the call can carry key presses (the profile's ``send_dtmf`` tool is offered)."""
    if session is None:
        session = bridge.profile_session(
            profile.instructions, profile.voice, profile.tools, profile.turn_detection
        )
    frames = bridge.preamble(session, encoding, profile.end_call, send_dtmf=keypad and profile.send_dtmf)
    if profile.greeting:
        frames.append(bridge.greeting(greeting_instructions(profile.greeting)))
    return frames
