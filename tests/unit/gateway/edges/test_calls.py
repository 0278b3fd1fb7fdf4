"""The WebRTC call's pure parts: SDP candidate filtering, its state table, the registry of calls, and
what a session's hold does to its track."""

from __future__ import annotations

import json

import pytest

from omnivox.core.errors import InvalidMessage, NotFound
from omnivox.gateway.edges import calls
from omnivox.protocol.realtime.media import REALTIME_MEDIA
from omnivox.protocol.realtime.wire import REALTIME

CANDIDATES = [
    "a=candidate:1 1 udp 2130706431 10.0.0.1 5000 typ host",
    "a=candidate:2 1 udp 2130706431 10.0.0.2 5001 typ host",
]


def test_keep_candidates_keeps_lf_line_ends():
    sdp = "\n".join(["v=0", *CANDIDATES, "a=mid:0"])
    assert keep_lines(calls.keep_candidates(sdp, ["10.0.0.2"]), "\n") == ["v=0", CANDIDATES[1], "a=mid:0"]
    assert "\r" not in calls.keep_candidates(sdp, ["10.0.0.2"])


def keep_lines(sdp: str, sep: str) -> list[str]:
    return sdp.split(sep)


def test_keep_candidates_with_no_addresses_drops_every_candidate():
    sdp = "\r\n".join(["v=0", *CANDIDATES, ""])
    assert calls.keep_candidates(sdp, []) == "v=0\r\n"


def test_keep_candidates_leaves_an_sdp_without_candidates_alone():
    sdp = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\n"
    assert calls.keep_candidates(sdp, ["10.0.0.1"]) == sdp


def test_a_short_candidate_line_is_dropped():
    sdp = "\r\n".join(["v=0", "a=candidate:1 1 udp", CANDIDATES[0]])
    assert calls.keep_candidates(sdp, ["10.0.0.1"]).split("\r\n") == ["v=0", CANDIDATES[0]]


def test_keep_candidates_matches_the_address_field_exactly():
    sdp = "\r\n".join(["v=0", *CANDIDATES])
    assert calls.keep_candidates(sdp, ["10.0.0."]) == "v=0"
    assert calls.keep_candidates(sdp, ["5000"]) == "v=0"  # the port is not the address


def test_invalid_sdp_is_a_recoverable_400():
    err = calls.InvalidSdp("bad", param="sdp")
    assert isinstance(err, InvalidMessage)
    assert err.code == "invalid_sdp" and err.http_status == 400 and not err.fatal
    assert err.details == {"param": "sdp"}


def test_the_call_states():
    S = calls.CallState
    assert calls.TRANSITIONS[S.CONNECTING] == {S.CONNECTED, S.ENDED}
    assert calls.TRANSITIONS[S.CONNECTED] == {S.ENDED}
    assert calls.TRANSITIONS[S.ENDED] == frozenset()
    assert [s.value for s in S] == ["connecting", "connected", "ended"]


class FakeCall:
    kind = "webrtc"

    def __init__(self, call_id: str, state: calls.CallState) -> None:
        self.id = call_id
        self.state = state
        self.end_reasons: list[str] = []

    @property
    def ended(self) -> bool:
        return self.state is calls.CallState.ENDED

    def end(self, reason: str) -> None:
        self.end_reasons.append(reason)


def test_the_registry_finds_calls_in_progress():
    reg = calls.CallRegistry()
    live = FakeCall("rtc_1", calls.CallState.CONNECTED)
    reg.calls[live.id] = live  # type: ignore[assignment]
    assert len(reg) == 1
    assert reg.find(None) is None
    assert reg.find("rtc_1") is live


def test_the_registry_refuses_unknown_and_ended_calls():
    reg = calls.CallRegistry()
    reg.calls["rtc_2"] = FakeCall("rtc_2", calls.CallState.ENDED)  # type: ignore[assignment]
    for call_id in ("rtc_2", "rtc_404"):
        with pytest.raises(NotFound) as err:
            reg.find(call_id)
        assert err.value.details["param"] == "call_id"
        assert call_id in err.value.message


async def test_closing_the_registry_ends_every_call():
    reg = calls.CallRegistry()
    a, b = FakeCall("a", calls.CallState.CONNECTING), FakeCall("b", calls.CallState.CONNECTED)
    reg.calls.update({"a": a, "b": b})  # type: ignore[dict-item]
    await reg.close()
    assert a.end_reasons == b.end_reasons == ["the gateway is shutting down"]


async def test_a_reply_held_by_the_session_is_held_on_the_track_until_resumed():
    """Whatever the caller asked for: the track acts on omnivox's own events, and the caller's data
    channel is sent them only when it asked (``?omnivox_events=true``)."""
    for query, told in (({}, False), ({"omnivox_events": "true"}, True)):
        call = calls.Call(REALTIME_MEDIA, connect_timeout_s=5, withheld=REALTIME.withheld(query))
        try:
            paused = json.dumps(
                {"type": "omnivox.interruption.paused", "response_id": "r1"}, separators=(",", ":")
            )
            await call.send(paused)
            assert call.playout.paused
            await call.send(json.dumps({"type": "omnivox.interruption.resumed", "response_id": "r1"}))
            assert not call.playout.paused
            assert (paused in call._pending) is told  # (for the data channel, once it opens)
        finally:
            await call.pc.close()
