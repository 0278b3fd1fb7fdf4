"""Gateway edges, their pure parts: ephemeral key bookkeeping, the call track's frame assembly and
playback events (no aiortc pacing), SDP candidate filtering, the call state table and registry."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from omnivox.core.errors import InvalidMessage, NotFound, TooManySessions, Unauthorized
from omnivox.gateway.edges import calls
from omnivox.gateway.edges.call_audio import CHUNK_MS, FRAME_MS, WebRtcPlayout
from omnivox.gateway.edges.client_keys import PREFIX, ClientKeys, Grant, is_ephemeral


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---- ephemeral client keys


def test_is_ephemeral():
    assert is_ephemeral("ek_abc")
    assert is_ephemeral(PREFIX)
    assert not is_ephemeral(None)
    assert not is_ephemeral("")
    assert not is_ephemeral("sk_abc")
    assert not is_ephemeral("EK_abc")


def test_minted_keys_are_long_random_and_distinct():
    keys = ClientKeys(100, clock=Clock())
    minted = {keys.mint(60)[0] for _ in range(20)}
    assert len(minted) == 20
    for key in minted:
        assert key.startswith(PREFIX) and len(key) >= len(PREFIX) + 43
        assert all(c.isalnum() or c in "-_" for c in key[len(PREFIX) :])
    assert len(keys) == 20


def test_keys_are_held_by_their_sha256_only():
    keys = ClientKeys(10, clock=Clock())
    key, grant = keys.mint(60)
    assert list(keys._keys) == [hashlib.sha256(key.encode()).digest()]
    assert keys._keys[hashlib.sha256(key.encode()).digest()] is grant


def test_expiry_is_truncated_to_whole_seconds():
    keys = ClientKeys(10, clock=Clock(1000.9))
    _, grant = keys.mint(30.5)
    assert grant.expires_at == 1031.0 and isinstance(grant.expires_at, float)


def test_a_grant_without_defaults_carries_none():
    _, grant = ClientKeys(10, clock=Clock()).mint(60)
    assert grant == Grant(expires_at=1060.0, session=None)


def test_a_grant_is_frozen():
    _, grant = ClientKeys(10, clock=Clock()).mint(60)
    with pytest.raises(AttributeError):
        grant.expires_at = 0  # type: ignore[misc]


def test_a_key_is_good_until_just_before_it_expires():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = keys.mint(10)
    clock.now = 1009.999
    keys.check(key)
    clock.now = 1010.0
    with pytest.raises(Unauthorized, match="expired"):
        keys.check(key)


def test_an_expired_take_spends_the_key_all_the_same():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = keys.mint(1)
    clock.now += 5
    with pytest.raises(Unauthorized, match="expired"):
        keys.take(key)
    with pytest.raises(Unauthorized, match="already used"):
        keys.take(key)
    assert len(keys) == 0


def test_a_failed_check_keeps_an_expired_key_until_the_next_mint():
    clock = Clock()
    keys = ClientKeys(10, clock=clock)
    key, _ = keys.mint(1)
    clock.now += 5
    with pytest.raises(Unauthorized):
        keys.check(key)
    assert len(keys) == 1
    keys.mint(60)
    assert len(keys) == 1  # the expired one was forgotten, the new one counted


def test_a_zero_ttl_key_is_born_expired():
    keys = ClientKeys(10, clock=Clock())
    key, _ = keys.mint(0)
    with pytest.raises(Unauthorized, match="expired"):
        keys.take(key)


def test_a_limit_of_zero_mints_nothing():
    with pytest.raises(TooManySessions, match="0 ephemeral keys"):
        ClientKeys(0, clock=Clock()).mint(60)


def test_spending_a_key_makes_room():
    keys = ClientKeys(1, clock=Clock())
    key, _ = keys.mint(60)
    with pytest.raises(TooManySessions):
        keys.mint(60)
    keys.take(key)
    keys.mint(60)


def test_a_key_of_another_store_is_unknown():
    a, b = ClientKeys(10, clock=Clock()), ClientKeys(10, clock=Clock())
    key, _ = a.mint(60)
    with pytest.raises(Unauthorized, match="unknown"):
        b.take(key)
    a.take(key)


def test_the_errors_have_their_http_statuses():
    assert Unauthorized("x").http_status == 401
    assert TooManySessions("x").http_status == 429


# ---- the call's outgoing track (frames assembled without the real-time pacing)

RATE = 24000
FRAME = RATE * FRAME_MS // 1000  # samples per frame


def pcm(samples: int, value: int = 1000) -> bytes:
    return (np.full(samples, value, "<i2")).tobytes()


def track():
    said: list[tuple[str, str]] = []
    return WebRtcPlayout(RATE, lambda kind, rid: said.append((kind, rid)), clock=Clock(0.0)), said


def frame_values(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, "<i2")


def test_the_frame_sizes():
    t, _ = track()
    assert FRAME_MS == 20 and CHUNK_MS == 40
    assert t._frame_bytes == FRAME * 2
    assert WebRtcPlayout(16000, lambda k, r: None)._frame_bytes == 640


def test_an_empty_track_plays_silence_and_says_nothing():
    t, said = track()
    out = t._take()
    assert len(out) == FRAME * 2 and not frame_values(out).any()
    assert said == [] and t.played_ms == 0 and t.playing is None


def test_push_counts_what_is_buffered_and_ignores_empty_audio():
    t, _ = track()
    t.push("r", pcm(100))
    t.push("r", b"")
    assert t.buffered == 200 and len(t._chunks) == 1


def test_a_short_reply_is_padded_with_silence_and_stops_when_over():
    t, said = track()
    t.push("r", pcm(FRAME // 2, 7))
    t.audio_over("r")
    values = frame_values(t._take())
    assert (values[: FRAME // 2] == 7).all() and not values[FRAME // 2 :].any()
    assert said == [("started", "r"), ("stopped", "r")]
    assert t.played_ms == pytest.approx(FRAME_MS / 2)
    assert t.buffered == 0 and t.playing is None


def test_a_frame_spans_chunks():
    t, said = track()
    t.push("r", pcm(FRAME // 4, 1))
    t.push("r", pcm(FRAME, 2))
    values = frame_values(t._take())
    assert (values[: FRAME // 4] == 1).all() and (values[FRAME // 4 :] == 2).all()
    assert t.buffered == (FRAME // 4) * 2
    assert said == [("started", "r")]


def test_a_reply_without_audio_over_keeps_playing_through_silence():
    t, said = track()
    t.push("r", pcm(FRAME))
    t._take()
    t._take()
    assert t.playing == "r" and said == [("started", "r")]
    t.audio_over("r")  # nothing left buffered: it has stopped at once
    assert said == [("started", "r"), ("stopped", "r")] and t.playing is None


def test_audio_over_while_audio_is_left_waits_for_it():
    t, said = track()
    t.push("r", pcm(FRAME * 2))
    t._take()
    t.audio_over("r")
    assert said == [("started", "r")]
    t._take()
    assert said == [("started", "r"), ("stopped", "r")]


def test_audio_over_of_a_reply_not_playing_says_nothing_yet():
    t, said = track()
    t.audio_over("later")
    assert said == []
    t.push("later", pcm(FRAME))
    t._take()
    assert said == [("started", "later"), ("stopped", "later")]


def test_the_next_reply_stops_the_one_before():
    t, said = track()
    t.push("a", pcm(FRAME // 2))
    t.push("b", pcm(FRAME // 2))
    t._take()
    assert said == [("started", "a"), ("stopped", "a"), ("started", "b")]
    assert t.playing == "b"


def test_audio_of_no_response_plays_without_events():
    t, said = track()
    t.push(None, pcm(FRAME, 3))
    assert (frame_values(t._take()) == 3).all()
    assert said == [] and t.played_ms == FRAME_MS


def test_clear_of_nothing_playing_returns_none_but_cuts_the_named_reply():
    t, said = track()
    t.push("r", pcm(FRAME))
    assert t.clear("r") is None
    assert t.buffered == 0 and len(t._chunks) == 0
    t.push("r", pcm(FRAME))
    assert t.buffered == 0
    t.push("s", pcm(FRAME))
    assert t.buffered == FRAME * 2
    assert said == []


def test_clear_says_nothing_stopped():
    t, said = track()
    t.push("r", pcm(FRAME * 3))
    t._take()
    assert t.clear() == "r"
    assert said == [("started", "r")] and t.playing is None
    assert not frame_values(t._take()).any()


def test_played_ms_counts_reply_audio_only():
    t, _ = track()
    t.push("r", pcm(FRAME + FRAME // 2))
    for _ in range(4):
        t._take()
    assert t.played_ms == pytest.approx(FRAME_MS * 1.5)


# ---- SDP candidates, the call's states and registry

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
