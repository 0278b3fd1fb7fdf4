"""A phone call's life: ringing, answered or not, and what its end tells."""

from __future__ import annotations

import asyncio

from omnivox.core.errors import DialFailed
from omnivox.gateway.telephony.call import PhoneCall, PhoneState
from omnivox.protocol.realtime.phone import REALTIME_PHONE
from omnivox.telephony.playout import PacedPlayout


def call() -> tuple[PhoneCall, list[str]]:
    reasons: list[str] = []
    return PhoneCall("sip", REALTIME_PHONE, "audio/pcmu", on_end=reasons.append), reasons


async def test_a_session_waits_for_the_answer() -> None:
    c, _ = call()
    waiting = asyncio.ensure_future(c.wait_answered())
    await asyncio.sleep(0)
    assert not waiting.done() and c.state is PhoneState.RINGING
    c.answered(PacedPlayout(c.on_playback))
    assert await waiting is True and c.state is PhoneState.ACTIVE


async def test_a_call_that_fails_ringing_ends_once_and_never_answers() -> None:
    c, reasons = call()
    published: list[str] = []
    c.sidebands.publish = published.append  # type: ignore[method-assign]
    waiting = asyncio.ensure_future(c.wait_answered())
    c.fail(DialFailed("nobody answered", outcome="no_answer"))
    c.end("again")
    assert await waiting is False
    assert reasons == ["nobody answered"] and c.ended
    assert '"dial_failed"' in published[0] and '"no_answer"' in published[0]
