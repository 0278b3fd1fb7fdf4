"""A phone call's life: ringing, answered or not, and what its end tells."""

from __future__ import annotations

import asyncio
import json

import pytest

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


# ---- the session's side: what its frames do to the playout, and what the caller's side delivers


class FakePlayout:
    """A stand-in playout (a mock: the paced one is tested in telephony/): records each call."""

    def __init__(self, heard_ms: float = 0.0) -> None:
        self.playing: str | None = None
        self.calls: list[tuple] = []
        self._heard = heard_ms
        self._buffered = 0

    @property
    def buffered(self) -> int:
        return self._buffered

    def push(self, response_id, audio) -> None:
        self.calls.append(("push", response_id, audio))

    def audio_over(self, response_id) -> None:
        self.calls.append(("audio_over", response_id))

    def pause(self) -> None:
        self.calls.append(("pause",))

    def resume(self) -> None:
        self.calls.append(("resume",))

    def clear(self, response_id=None):
        self.calls.append(("clear", response_id))
        return "resp_playing"

    def heard_ms(self, response_id) -> float:
        return self._heard


def _answered(heard_ms: float = 0.0) -> tuple[PhoneCall, FakePlayout, list[str]]:
    c, reasons = call()
    playout = FakePlayout(heard_ms)
    c.answered(playout)
    return c, playout, reasons


def _pending(c: PhoneCall) -> list:
    frames = []
    while not c._inbound.empty():
        frames.append(c._inbound.get_nowait())
    return frames


async def test_reply_audio_is_played_and_a_done_reply_marks_its_audio_over() -> None:
    import base64

    c, playout, _ = _answered()
    delta = {
        "type": "response.output_audio.delta",
        "response_id": "r1",
        "delta": base64.b64encode(b"\x01\x02").decode(),
    }
    await c.send(json.dumps(delta))
    await c.send(json.dumps({"type": "response.done", "response": {"id": "r1", "status": "completed"}}))
    assert playout.calls == [("push", "r1", b"\x01\x02"), ("audio_over", "r1")]


async def test_a_cancelled_reply_clears_the_playout_and_tells_the_sidebands() -> None:
    c, playout, _ = _answered()
    published: list[str] = []
    c.sidebands.publish = published.append  # type: ignore[method-assign]
    await c.send(json.dumps({"type": "response.done", "response": {"id": "r1", "status": "cancelled"}}))
    assert ("clear", "r1") in playout.calls and ("audio_over", "r1") in playout.calls
    assert any('"resp_playing"' in p for p in published)  # what was playing, said cleared


async def test_a_truncation_past_what_the_caller_heard_is_corrected_to_what_played() -> None:
    c, _, _ = _answered(heard_ms=800.0)
    added = {
        "type": "response.output_item.added",
        "response_id": "r1",
        "item": {"type": "message", "id": "i1"},
    }
    await c.send(json.dumps(added))
    await c.send(json.dumps({"type": "conversation.item.truncated", "item_id": "i1", "audio_end_ms": 1500}))
    (heard,) = [json.loads(f) for f in _pending(c)]
    assert heard["type"] == "conversation.item.truncate" and heard["item_id"] == "i1"
    assert heard["audio_end_ms"] == 800
    # within what was heard, or an item the call never played: nothing to correct
    await c.send(json.dumps({"type": "conversation.item.truncated", "item_id": "i1", "audio_end_ms": 500}))
    await c.send(
        json.dumps({"type": "conversation.item.truncated", "item_id": "other", "audio_end_ms": 9000})
    )
    assert _pending(c) == []


async def test_caller_audio_waits_for_the_answer_and_is_capped() -> None:
    from omnivox.gateway.telephony.call import _MAX_INBOUND

    c, _ = call()
    c.caller_audio(b"\xff" * 160)  # ringing: nobody to hear it
    assert _pending(c) == []
    c.answered(FakePlayout())
    for _ in range(_MAX_INBOUND + 20):
        c.caller_audio(b"\xff" * 160)
    frames = _pending(c)
    assert len(frames) == _MAX_INBOUND and json.loads(frames[0])["type"] == "input_audio_buffer.append"


async def test_a_key_press_becomes_a_user_message_and_a_sideband_event() -> None:
    c, _, _ = _answered()
    published: list[str] = []
    c.sidebands.publish = published.append  # type: ignore[method-assign]
    c.caller_dtmf("5")
    (frame,) = [json.loads(f) for f in _pending(c)]
    assert frame["item"]["content"][0]["text"] == "[DTMF 5]"
    assert json.loads(published[0])["event"] == "5"


async def test_after_the_end_the_session_reads_none_and_cannot_send() -> None:
    from omnivox.connection.sockets import PeerGone

    c, _, reasons = _answered()
    await c.close(1011)
    assert c.close_code == 1011 and reasons == ["the session closed (1011)"]
    assert await c.receive() is None
    with pytest.raises(PeerGone, match="the session closed"):
        await c.send('{"type": "x"}')
    c.caller_audio(b"\xff" * 160)
    c.caller_dtmf("1")
    assert _pending(c) == []


async def test_a_hang_up_that_fails_still_ends_the_call() -> None:
    def broken(reason: str) -> None:
        raise OSError("the SIP socket is gone")

    c = PhoneCall("sip", REALTIME_PHONE, "audio/pcmu", on_end=broken)
    c.end("bye")
    assert c.ended and c.end_reason == "bye"


async def test_the_playouts_reports_reach_the_session_as_well_as_the_sidebands() -> None:
    c, _, _ = _answered()
    published: list[str] = []
    c.sidebands.publish = published.append  # type: ignore[method-assign]
    c.on_playback("started", "r1")
    c.on_playback("stopped", "r1")
    c.on_playback("cleared", "r2")  # (the session cut it itself: nothing to tell it)
    reports = [json.loads(f) for f in _pending(c)]
    assert [(r["type"], r["response_id"], r["state"]) for r in reports] == [
        ("omnivox.output_audio_buffer.report", "r1", "started"),
        ("omnivox.output_audio_buffer.report", "r1", "stopped"),
    ]
    assert [json.loads(p)["type"] for p in published] == [
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
    ]


def _key_call(done: dict) -> str:
    return json.dumps({"type": "response.function_call_arguments.done", "name": "send_dtmf", **done})


async def test_send_dtmf_presses_the_keys_in_order_and_answers_the_tool() -> None:
    c, _, _ = _answered()
    pressed: list[str] = []

    async def keypad(digits: str) -> None:
        await asyncio.sleep(0.01)
        pressed.append(digits)

    c.keypad = keypad
    await c.send(_key_call({"call_id": "k1", "arguments": json.dumps({"digits": "1*"})}))
    await c.send(_key_call({"call_id": "k2", "arguments": json.dumps({"digits": "9#"})}))
    await asyncio.wait_for(asyncio.gather(*c._tasks), 5)
    assert pressed == ["1*", "9#"]  # one after the other, in the order asked
    outputs = [json.loads(f)["item"] for f in _pending(c)]
    assert [(o["call_id"], json.loads(o["output"])) for o in outputs] == [
        ("k1", {"pressed": "1*"}),
        ("k2", {"pressed": "9#"}),
    ]


@pytest.mark.parametrize("digits", ["", "12x", "1" * 33])
async def test_send_dtmf_with_bad_digits_presses_nothing_and_says_why(digits) -> None:
    c, _, _ = _answered()
    pressed: list[str] = []

    async def keypad(d: str) -> None:
        pressed.append(d)

    c.keypad = keypad
    await c.send(_key_call({"call_id": "k1", "arguments": json.dumps({"digits": digits})}))
    await asyncio.wait_for(asyncio.gather(*c._tasks), 5)
    (frame,) = _pending(c)
    assert (
        pressed == [] and "digits must be 1 to 32" in json.loads(json.loads(frame)["item"]["output"])["error"]
    )


async def test_send_dtmf_on_a_call_without_a_keypad_says_so() -> None:
    c, _, _ = _answered()  # (a carrier's media stream has no keypad)
    await c.send(_key_call({"call_id": "k1", "arguments": json.dumps({"digits": "1"})}))
    await asyncio.wait_for(asyncio.gather(*c._tasks), 5)
    (frame,) = _pending(c)
    assert json.loads(json.loads(frame)["item"]["output"]) == {"error": "a sip call cannot send keys"}
