"""/v1/realtime over WebRTC (``POST /v1/realtime/calls``) and ephemeral client keys, end to end.

aiortc is the caller (``bench.webrtc_client``: an Opus microphone track playing hibari speech, the
``oai-events`` data channel, the played-back track recorded). The worker is the cascade with the
echo LLM and PocketSphinx, so each test knows what the reply says.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import numpy as np
import pytest
import websockets
from aiortc import RTCConfiguration, RTCPeerConnection

from cluster import ECHO_VOICE, cluster
from omnivox.bench.webrtc_client import CallRefused, WebRtcCall, loopback_only
from omnivox.voice.asr.base import word_error_rate
from rtclient import Events, client, silence, speech

WEATHER = "what is the weather like in paris today"
STORY = "tell me a long story about a brave little fox who lived in the forest by the river"
AUTH = {"Authorization": "Bearer secret"}


def rtc_env(**extra: str) -> dict[str, str]:
    loopback_only()  # this process's calls, and the gateway's (below), stay on 127.0.0.1
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_WEBRTC_CONNECT_TIMEOUT_S": "3",
        "OMNIVOX_WEBRTC_HOST_ADDRESSES": '["127.0.0.1"]',
        **ECHO_VOICE,
    }
    return env | extra


@pytest.fixture(scope="module")
def rtc_cluster(tmp_path_factory):
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("rtc"), **rtc_env()) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(rtc_cluster):
    rtc_cluster.wait_idle(1, timeout=20)


def sessions(c) -> list[dict]:
    return httpx.get(c.url + "/api/sessions", headers=AUTH).json()["sessions"]


async def until(check, timeout: float = 15.0) -> None:
    """Wait (letting this test's own aiortc peer run) until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def mint(c, seconds: int = 60, **session) -> dict:
    body = {"expires_after": {"anchor": "created_at", "seconds": seconds}}
    if session:
        body["session"] = session
    r = httpx.post(c.url + "/v1/realtime/client_secrets", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_call_carries_speech_both_ways_and_events_on_the_data_channel(rtc_cluster):
    call = await WebRtcCall.open(rtc_cluster.url, "secret", session={"instructions": "Be brief."})
    try:
        updated = await call.wait_for("session.updated")
        assert updated["session"]["instructions"] == "Be brief."
        assert updated["session"]["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
        call.mic.play(np.concatenate([speech(WEATHER), silence(1.0)]))
        done = await call.wait_for("response.done", timeout=30)
        rid = done["response"]["id"]
        await call.wait_for("output_audio_buffer.stopped", response_id=rid, timeout=20)
        heard = call.of("conversation.item.input_audio_transcription.completed")[0]["transcript"]
        # a sideband WebSocket attaches to the call: it hears its events and may steer it
        async with websockets.connect(
            f"{rtc_cluster.ws}/v1/realtime?call_id={call.call_id}", additional_headers=AUTH
        ) as side:
            side_events: list[dict] = []
            await side.send(
                json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}})
            )
            while not any(e["type"] == "response.done" for e in side_events):
                side_events.append(json.loads(await asyncio.wait_for(side.recv(), 20)))
        text_done = await call.wait_for("response.done", count=2)
    finally:
        await call.close()
    assert word_error_rate(WEATHER, heard) <= 0.1
    candidates = [line.split()[4] for line in call.answer_sdp.splitlines() if line.startswith("a=candidate:")]
    assert candidates and set(candidates) == {"127.0.0.1"}
    assert done["response"]["status"] == "completed"
    transcript = done["response"]["output"][0]["content"][0]["transcript"]
    assert transcript == f"You said: {heard}"
    assert not call.of("response.output_audio.delta")  # the audio came on the track, not the channel
    kinds = [e["type"] for _, e in call.events]
    assert kinds.index("output_audio_buffer.started") < kinds.index("output_audio_buffer.stopped")
    assert call.of("output_audio_buffer.started")[0]["response_id"] == rid
    played = call.heard_audio()
    assert np.sqrt(np.mean(played**2)) > 0.005 and len(call.loud_at) > 25  # over half a second of speech
    assert text_done["response"]["output_modalities"] == ["text"]
    side_done = next(e for e in side_events if e["type"] == "response.done")
    assert side_done["response"]["id"] == text_done["response"]["id"]


async def test_barge_in_and_clear_cut_the_played_audio(rtc_cluster):
    call = await WebRtcCall.open(rtc_cluster.url, "secret")
    try:
        await call.wait_for("session.created")
        call.mic.play(np.concatenate([speech(STORY), silence(0.8)]))
        started = await call.wait_for("output_audio_buffer.started", timeout=30)
        await asyncio.sleep(1.0)  # the reply is several seconds long: talk over it
        call.mic.play(np.concatenate([speech(WEATHER), silence(1.0)]))
        cleared = await call.wait_for("output_audio_buffer.cleared", timeout=20)
        first = await call.wait_for("response.done")
        second = await call.wait_for("response.done", count=2, timeout=30)
        # the client's output_audio_buffer.clear cuts the reply to the interruption
        await call.wait_for("output_audio_buffer.started", count=2, timeout=20)
        call.send({"type": "output_audio_buffer.clear"})
        cleared_by_client = await call.wait_for("output_audio_buffer.cleared", count=2, timeout=20)
    finally:
        await call.close()
    assert cleared["response_id"] == started["response_id"] == first["response"]["id"]
    assert first["response"]["status"] == "cancelled"
    assert first["response"]["status_details"]["reason"] == "turn_detected"
    assert second["response"]["status"] in ("completed", "cancelled")
    assert cleared_by_client["response_id"] == second["response"]["id"]
    assert not call.of("output_audio_buffer.stopped", response_id=started["response_id"])


async def test_malformed_offers_are_refused_with_the_field_named(rtc_cluster):
    url = rtc_cluster.url + "/v1/realtime/calls"
    bad = httpx.post(url, content="hello, not sdp", headers={**AUTH, "Content-Type": "application/sdp"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "sdp"
    broken = httpx.post(
        url, content="v=0\r\nm=garbage\r\n", headers={**AUTH, "Content-Type": "application/sdp"}
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_sdp"
    no_sdp = httpx.post(url, files={"session": (None, "{}")}, headers=AUTH)
    assert no_sdp.status_code == 422 and no_sdp.json()["error"]["param"] == "sdp"
    bad_session = httpx.post(
        url,
        files={
            "sdp": (None, "v=0\r\n"),
            "session": (None, '{"audio": {"input": {"turn_detection": {"threshold": 7}}}}'),
        },
        headers=AUTH,
    )
    assert bad_session.json()["error"]["param"] == "session.audio.input.turn_detection.threshold"
    unauthorized = httpx.post(url, content="v=0\r\n", headers={"Content-Type": "application/sdp"})
    assert unauthorized.status_code == 401
    assert not sessions(rtc_cluster)


async def test_a_call_that_never_connects_media_is_released(rtc_cluster):
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    r = httpx.post(
        rtc_cluster.url + "/v1/realtime/calls",
        content=pc.localDescription.sdp,
        headers={**AUTH, "Content-Type": "application/sdp"},
    )
    await pc.close()  # the caller goes away before any media flows
    assert r.status_code == 201
    assert [s["kind"] for s in sessions(rtc_cluster)] == ["realtime"]  # admitted like a WebSocket
    assert rtc_cluster.health()["workers_idle"] == 1  # but it takes no worker until media connects
    await until(lambda: not sessions(rtc_cluster))  # the connect timeout is 3 s
    assert rtc_cluster.health()["workers_idle"] == 1


async def test_a_data_channel_closing_mid_response_ends_the_call_cleanly(rtc_cluster):
    call = await WebRtcCall.open(rtc_cluster.url, "secret")
    try:
        await call.wait_for("session.created")
        call.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": STORY}],
                },
            }
        )
        call.send({"type": "response.create"})
        await call.wait_for("output_audio_buffer.started", timeout=20)
        side = await websockets.connect(
            f"{rtc_cluster.ws}/v1/realtime?call_id={call.call_id}", additional_headers=AUTH
        )
        call.channel.close()
        await until(lambda: not sessions(rtc_cluster))
        await asyncio.wait_for(side.wait_closed(), 10)  # the call's sideband ends with it
        assert side.close_code == 1000
    finally:
        await call.close()
    rtc_cluster.wait_idle(1, timeout=15)
    again = await WebRtcCall.open(rtc_cluster.url, "secret")  # the worker serves the next call
    try:
        await again.wait_for("session.created")
    finally:
        await again.close()


async def test_an_ephemeral_key_opens_one_session_then_is_spent(rtc_cluster):
    secret = mint(rtc_cluster, instructions="Talk like a pirate.")
    assert secret["value"].startswith("ek_") and secret["session"]["instructions"] == "Talk like a pirate."
    async with client(rtc_cluster.ws, api_key=secret["value"]).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        updated = await events.wait_for("session.updated")
        assert updated.session.instructions == "Talk like a pirate."
        await events.stop()
    rtc_cluster.wait_idle(1, timeout=15)
    async with client(rtc_cluster.ws, api_key=secret["value"]).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        refused = await events.wait_for("error")
        assert refused.error.code == "unauthorized" and not events.of("session.created")
    with pytest.raises(CallRefused) as used:
        await WebRtcCall.open(rtc_cluster.url, secret["value"])
    assert used.value.status == 401
    # a wrong one, and an ephemeral key cannot mint keys (it is not the client key)
    with pytest.raises(CallRefused) as wrong:
        await WebRtcCall.open(rtc_cluster.url, "ek_not-a-key")
    assert wrong.value.status == 401
    other = mint(rtc_cluster)
    r = httpx.post(
        rtc_cluster.url + "/v1/realtime/client_secrets",
        json={},
        headers={"Authorization": f"Bearer {other['value']}"},
    )
    assert r.status_code == 401
    # over WebRTC, a key opens its one call
    call = await WebRtcCall.open(rtc_cluster.url, other["value"])
    try:
        await call.wait_for("session.created")
    finally:
        await call.close()


async def test_the_openai_sdk_mints_keys_and_places_calls(rtc_cluster):
    sdk = client(rtc_cluster.ws)
    secret = await sdk.realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 120},
        session={"type": "realtime", "instructions": "Be kind.", "output_modalities": ["text"]},
    )
    assert secret.value.startswith("ek_") and secret.session.instructions == "Be kind."
    call = WebRtcCall()
    try:
        await call.pc.setLocalDescription(await call.pc.createOffer())
        keyed = client(rtc_cluster.ws, api_key=secret.value)
        answer = await keyed.realtime.calls.create(
            sdp=call.pc.localDescription.sdp, session={"type": "realtime", "max_output_tokens": 20}
        )
        from aiortc import RTCSessionDescription

        await call.pc.setRemoteDescription(RTCSessionDescription(answer.text, "answer"))
        updated = await call.wait_for("session.updated")
        # the key's defaults, then the call's own session
        assert (updated["session"]["instructions"], updated["session"]["max_output_tokens"]) == (
            "Be kind.",
            20,
        )
        assert updated["session"]["output_modalities"] == ["text"]
    finally:
        await call.close()


async def test_an_expired_ephemeral_key_is_refused(rtc_cluster):
    secret = mint(rtc_cluster, seconds=10)
    bad = httpx.post(
        rtc_cluster.url + "/v1/realtime/client_secrets",
        json={"expires_after": {"anchor": "created_at", "seconds": 5}},
        headers=AUTH,
    )
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "expires_after.seconds"
    await asyncio.sleep(secret["expires_at"] - time.time() + 0.5)
    async with client(rtc_cluster.ws, api_key=secret["value"]).realtime.connect(model="omnivox") as conn:
        events = Events(conn)
        refused = await events.wait_for("error")
    assert refused.error.code == "unauthorized" and "expired" in refused.error.message


async def test_only_the_key_that_opened_a_call_or_the_client_key_controls_it(rtc_cluster):
    """Issue 25 finding 1: any ephemeral key attached a sideband to anyone's call (heard its
    transcripts, spoke into it)."""
    opener = mint(rtc_cluster)
    call = await WebRtcCall.open(rtc_cluster.url, opener["value"])
    try:
        await call.wait_for("session.created")
        url = f"{rtc_cluster.ws}/v1/realtime?call_id={call.call_id}"
        stranger = mint(rtc_cluster)
        bearer = {"Authorization": f"Bearer {stranger['value']}"}
        async with websockets.connect(url, additional_headers=bearer) as spy:
            refused = json.loads(await asyncio.wait_for(spy.recv(), 10))
            await asyncio.wait_for(spy.wait_closed(), 10)
        assert refused["type"] == "error" and refused["error"]["code"] == "unauthorized"
        assert spy.close_code == 1008
        hangup = f"{rtc_cluster.url}/v1/realtime/calls/{call.call_id}/hangup"
        assert httpx.post(hangup, headers=bearer).status_code == 401
        # the opener's own key, and the client key, do control it
        mine = {"Authorization": f"Bearer {opener['value']}"}
        async with websockets.connect(url, additional_headers=mine) as side:
            await side.send(json.dumps({"type": "session.update", "session": {"instructions": "Hi."}}))
            while (event := json.loads(await asyncio.wait_for(side.recv(), 10)))["type"] != "session.updated":
                assert event["type"] != "error", event
        assert httpx.post(hangup, headers=mine).status_code == 200
    finally:
        await call.close()
    rtc_cluster.wait_idle(1, timeout=15)
    # the stranger's key was not spent on the refused sideband: it still opens a session of its own
    async with client(rtc_cluster.ws, api_key=stranger["value"]).realtime.connect(model="omnivox") as conn:
        own = Events(conn)
        await own.wait_for("session.created", timeout=20)
        await own.stop()


@pytest.fixture(scope="module")
def lead_cluster(tmp_path_factory):
    """The worker sends reply audio up to 5 s ahead of real time (``audio_lead_ms``, its most)."""
    env = rtc_env(OMNIVOX_AUDIO_LEAD_MS="5000")
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("rtc-lead"), **env) as c:
        yield c


async def test_the_calls_track_says_when_a_reply_plays_not_the_servers_model(lead_cluster):
    """Replies sent 5 s ahead: a reply asked for as soon as the first is done (both sent whole at
    once) queues on the call's track behind all of the first, so it plays ~5 s later than the
    worker's model of the player has it. By the track's reports it is still playing when the caller
    speaks 1.5 s into it (by the model it is over): the words are speech over it (it is cut, the
    track cleared), not a turn under a reply that plays on; after the track says it stopped, words
    are a new turn."""
    lead_cluster.wait_idle(1, timeout=20)
    call = await WebRtcCall.open(lead_cluster.url, "secret")
    try:
        await call.wait_for("session.created")
        call.mic.play(np.concatenate([speech(STORY), silence(1.0)]))  # a reply of ~5 s
        await call.wait_for("response.done", timeout=30)
        call.send({"type": "response.create"})  # the same again, queued behind all of the first
        queued = await call.wait_for("output_audio_buffer.started", count=2, timeout=30)
        await asyncio.sleep(1.5)  # (by the worker's model it is over; the caller hears ~3.5 s more)
        call.mic.play(np.concatenate([speech(WEATHER), silence(1.0)]))
        cleared = await call.wait_for("output_audio_buffer.cleared", timeout=30)
        third = await call.wait_for("response.done", count=3, timeout=30)
        await call.wait_for("output_audio_buffer.stopped", response_id=third["response"]["id"], timeout=30)
        call.mic.play(np.concatenate([speech(WEATHER), silence(1.0)]))  # after it has all played
        fourth = await call.wait_for("response.done", count=4, timeout=30)
    finally:
        await call.close()
    rid = queued["response_id"]
    assert cleared["response_id"] == rid
    assert not call.of("output_audio_buffer.stopped", response_id=rid)
    assert len(call.of("output_audio_buffer.cleared")) == 1  # the last words cut nothing
    assert third["response"]["status"] == fourth["response"]["status"] == "completed"
