"""Carrier media streams end to end: a Twilio-shaped stream client (``bench.carrier_client``,
written from Twilio's Media Streams documentation) calls a real gateway and cascade worker on
loopback; Telnyx and Plivo in short.

The worker is the cascade with the echo LLM and PocketSphinx, so each test knows what the reply
says. A sideband WebSocket (``/v1/realtime?call_id=``) watches each call's session events.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import numpy as np
import pytest
import websockets
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from cluster import ECHO_VOICE, cluster
from omnivox.bench.carrier_client import CarrierStream
from omnivox.telephony.carriers import plivo, twilio
from omnivox.voice.asr.base import word_error_rate
from rtclient import RATE, silence, speech

WEATHER = "what is the weather like in paris today"
STORY = "tell me a long story about a brave little fox who lived in the forest by the river"
TOKEN = "twilio-auth-token"
PLIVO_TOKEN = "plivo-auth-token"
TELNYX_KEY = Ed25519PrivateKey.generate()  # the test stands in for Telnyx's signing key
AUTH = {"Authorization": "Bearer secret"}


@pytest.fixture(scope="module")
def phone_cluster(tmp_path_factory):
    public = TELNYX_KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_TWILIO_AUTH_TOKEN": TOKEN,
        "OMNIVOX_TELNYX_PUBLIC_KEY": base64.b64encode(public).decode(),
        "OMNIVOX_PLIVO_AUTH_TOKEN": PLIVO_TOKEN,
        **ECHO_VOICE,
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("phone"), **env) as c:
        yield c


@pytest.fixture(autouse=True)
def idle_worker(phone_cluster):
    phone_cluster.wait_idle(1, timeout=20)


def sessions(c) -> list[dict]:
    return httpx.get(c.url + "/api/sessions", headers=AUTH).json()["sessions"]


def stream_url(c, carrier: str = "twilio") -> str:
    return f"{c.ws}/telephony/{carrier}/stream"


def signed(c, carrier: str = "twilio") -> dict[str, str]:
    """The handshake's headers as each carrier signs them (from their documentation)."""
    url = stream_url(c, carrier)
    if carrier == "telnyx":
        ts = str(int(time.time()))
        signature = TELNYX_KEY.sign(f"{ts}|".encode())
        return {"telnyx-signature-ed25519": base64.b64encode(signature).decode(), "telnyx-timestamp": ts}
    if carrier == "plivo":
        nonce = "12345678901234567890"
        return {
            "X-Plivo-Signature-V3": plivo.signature_v3(PLIVO_TOKEN, "GET", url, nonce),
            "X-Plivo-Signature-V3-Nonce": nonce,
        }
    return {"X-Twilio-Signature": twilio.signature(TOKEN, url, {})}


class Sideband:
    """A sideband on the call's session: every event, in order."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.events: list[dict] = []
        self.arrived: list[float] = []  # when each event arrived (time.monotonic)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self.events.append(json.loads(raw))
                self.arrived.append(time.monotonic())
        except websockets.ConnectionClosed:
            pass

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 30.0, **match) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.of(kind) if all(e.get(k) == v for k, v in match.items())]
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {kind}; saw {[e['type'] for e in self.events]}")
            await asyncio.sleep(0.05)


async def attach(c, query: str = "") -> Sideband:
    """The sideband of the one phone call in progress (its session id is its call id); ``query``:
    more of its request (``&omnivox_events=true``)."""
    deadline = time.monotonic() + 10
    while not (found := [s for s in sessions(c) if s["session_id"].startswith("rtc")]):
        assert time.monotonic() < deadline, "the call never became a session"
        await asyncio.sleep(0.1)
    ws = await websockets.connect(
        f"{c.ws}/v1/realtime?call_id={found[0]['session_id']}{query}", additional_headers=AUTH
    )
    return Sideband(ws)


async def test_twilio_webhook_answers_connect_stream_and_checks_the_signature(phone_cluster):
    url = phone_cluster.url + "/telephony/twilio/voice"
    form = {"CallSid": "CA123", "From": "+15550001111", "To": "+15550002222", "AccountSid": "AC1"}
    good = httpx.post(url, data=form, headers={"X-Twilio-Signature": twilio.signature(TOKEN, url, form)})
    assert good.status_code == 200 and good.headers["content-type"].startswith("application/xml")
    assert f'<Stream url="ws://127.0.0.1:{phone_cluster.port}/telephony/twilio/stream">' in good.text
    assert '<Parameter name="From" value="+15550001111"/>' in good.text and "<Connect>" in good.text
    wrong = httpx.post(url, data=form, headers={"X-Twilio-Signature": twilio.signature("other", url, form)})
    tampered = httpx.post(
        url, data={**form, "To": "+1999"}, headers={"X-Twilio-Signature": twilio.signature(TOKEN, url, form)}
    )
    missing = httpx.post(url, data=form)
    assert wrong.status_code == tampered.status_code == missing.status_code == 403


@pytest.mark.parametrize("carrier", ["twilio", "telnyx", "plivo"])
async def test_a_stream_without_a_valid_signature_is_refused(phone_cluster, carrier):
    good = signed(phone_cluster, carrier)
    forged = {
        k: "bm90IGl0" if "nonce" not in k.lower() and "timestamp" not in k else v for k, v in good.items()
    }
    stale = signed(phone_cluster, carrier)
    if carrier == "telnyx":  # signed ten minutes ago: a replay
        ts = str(int(time.time()) - 600)
        stale = {"telnyx-signature-ed25519": base64.b64encode(TELNYX_KEY.sign(f"{ts}|".encode())).decode()}
        stale["telnyx-timestamp"] = ts
    elif carrier == "plivo":  # the signature of another nonce
        stale = {**good, "X-Plivo-Signature-V3-Nonce": "another"}
    else:
        stale = {"X-Twilio-Signature": twilio.signature(TOKEN, stream_url(phone_cluster, "plivo"), {})}
    for headers in ({}, forged, stale, AUTH):  # the client key is no signature
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(stream_url(phone_cluster, carrier), additional_headers=headers)
        assert refused.value.response.status_code == 403
    assert not sessions(phone_cluster)


async def test_a_twilio_call_holds_a_conversation_with_marks_and_dtmf(phone_cluster):
    call = CarrierStream("twilio")
    await call.open(stream_url(phone_cluster), signed(phone_cluster), {"From": "+1555", "To": "+1666"})
    side = await attach(phone_cluster)
    try:
        await call.speak(np.concatenate([speech(WEATHER), silence(1.0)]), RATE)
        done = await side.wait_for("response.done", timeout=30)
        rid = done["response"]["id"]
        await side.wait_for("output_audio_buffer.stopped", response_id=rid, timeout=20)
        await call.press("5")
        dtmf = await side.wait_for("input_audio_buffer.dtmf_event_received")
        keyed = await side.wait_for("conversation.item.added", timeout=10, count=3)
    finally:
        await call.stop()
        await call.close()
    heard = side.of("conversation.item.input_audio_transcription.completed")[0]["transcript"]
    assert word_error_rate(WEATHER, heard) <= 0.5  # PocketSphinx on 8 kHz mu-law (the test recogniser)
    assert done["response"]["status"] == "completed"
    media = call.of("media")
    assert media and all(m["streamSid"] == call.stream_id for m in call.received_messages())
    assert {m["event"] for m in call.received_messages()} <= {"media", "mark", "clear"}
    assert not call.clears  # nobody spoke over the reply
    played = call.heard_audio()
    assert np.sqrt(np.mean(played**2)) > 0.01 and len(played) > 8000  # over a second of speech
    assert len(call.echoed) == len(call.of("mark"))  # every marker played and was echoed
    assert dtmf["event"] == "5"
    assert keyed["item"]["content"][0]["text"] == "[DTMF 5]"
    assert side.of("output_audio_buffer.started")[0]["response_id"] == rid
    # the stop ends the session when the gateway reads it, a moment after the client sent it
    deadline = time.monotonic() + 10
    while [s for s in sessions(phone_cluster) if s["session_id"].startswith("rtc")]:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert not [s for s in sessions(phone_cluster) if s["session_id"].startswith("rtc")]  # stop ended it


async def test_barge_in_clears_twilio_and_truncates_to_what_the_marks_say(phone_cluster):
    """Speech over the reply pauses the carrier's playback at once (a clear), before the judge's cut;
    a sideband hears omnivox's own events of it only when it asks."""
    call = CarrierStream("twilio")
    await call.open(stream_url(phone_cluster), signed(phone_cluster))
    side = await attach(phone_cluster)
    asking = await attach(phone_cluster, "&omnivox_events=true")
    try:
        await call.speak(np.concatenate([speech(STORY), silence(0.8)]), RATE)
        started = await side.wait_for("output_audio_buffer.started", timeout=30)
        await asyncio.sleep(1.5)  # the reply is several seconds long: talk over it
        await call.speak(np.concatenate([speech(WEATHER), silence(1.0)]), RATE)
        first = await side.wait_for("response.done", timeout=20)
        await side.wait_for("response.done", count=2, timeout=30)
        item = first["response"]["output"][0]["id"]
        await asyncio.sleep(0.5)
    finally:
        await call.stop()
        await call.close()
    assert call.clears, "barge-in sent no clear"
    assert first["response"]["id"] == started["response_id"]
    assert first["response"]["status"] == "cancelled"
    # the pause cleared the carrier's buffer: before the cut (the caller hears no more of it while
    # the words are judged)
    paused = asking.of("omnivox.interruption.paused")
    assert paused and paused[0]["response_id"] == first["response"]["id"]
    assert call.clears[0] < side.arrived[side.events.index(first)]
    assert not [e for e in side.events if e["type"].startswith("omnivox.")]
    truncated = [e for e in side.of("conversation.item.truncated") if e["item_id"] == item]
    # the session's last word on the item is what the caller heard by the carrier's marks
    assert truncated[-1]["audio_end_ms"] == int(call.marked_at_clear[0])
    assert 0 < truncated[-1]["audio_end_ms"] < 5000
    assert call.cleared_marks  # the markers the clear dropped came back, and did not count


async def test_bad_stream_input_is_dropped_and_the_call_goes_on(phone_cluster):
    call = CarrierStream("twilio")
    await call.open(stream_url(phone_cluster), signed(phone_cluster))
    side = await attach(phone_cluster)
    try:
        for junk in (
            "not json",
            json.dumps({"event": "nonsense"}),
            json.dumps({"event": "media", "media": {"payload": "%%% not base64"}}),
            json.dumps({"event": "dtmf", "dtmf": {"digit": "55"}}),
            json.dumps({"event": "mark", "mark": {"name": "never-sent"}}),
            json.dumps([1, 2, 3]),
            b"\x00\x01binary",
        ):
            await call.send_raw(junk)
        await call.speak(np.concatenate([speech(WEATHER), silence(1.0)]), RATE)
        done = await side.wait_for("response.done", timeout=30)
    finally:
        await call.stop()
        await call.close()
    assert done["response"]["status"] == "completed"


async def test_a_stream_that_never_starts_is_closed_without_a_session(phone_cluster):
    async with websockets.connect(stream_url(phone_cluster), additional_headers=signed(phone_cluster)) as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(json.dumps({"event": "stop", "streamSid": "MZ1"}))
        await asyncio.wait_for(ws.wait_closed(), 5)
    assert not sessions(phone_cluster)


@pytest.mark.parametrize("carrier", ["telnyx", "plivo"])
async def test_telnyx_and_plivo_streams_carry_a_conversation(phone_cluster, carrier):
    call = CarrierStream(carrier)
    await call.open(stream_url(phone_cluster, carrier), signed(phone_cluster, carrier))
    side = await attach(phone_cluster)
    try:
        await call.speak(np.concatenate([speech(WEATHER), silence(1.0)]), RATE)
        done = await side.wait_for("response.done", timeout=30)
        await side.wait_for("output_audio_buffer.stopped", response_id=done["response"]["id"], timeout=20)
        await call.press("7")
        dtmf = await side.wait_for("input_audio_buffer.dtmf_event_received")
    finally:
        await call.stop()
        await call.close()
    assert done["response"]["status"] == "completed"
    sent = {m["event"] for m in call.received_messages()}
    assert sent == ({"media", "mark"} if carrier == "telnyx" else {"playAudio", "checkpoint"})
    assert len(call.echoed) >= 5 and np.sqrt(np.mean(call.heard_audio() ** 2)) > 0.01
    assert dtmf["event"] == "7"
    if carrier == "plivo":
        payload = base64.b64decode(call.of("playAudio")[0]["media"]["payload"])
        assert call.of("playAudio")[0]["media"]["contentType"] == "audio/x-mulaw" and payload


async def test_the_carriers_marks_say_when_the_reply_has_played_not_the_servers_model(phone_cluster):
    """A carrier that plays what it is sent 2 s late (its buffer): the reply starts when the carrier
    echoes the marker sent before its first audio, not when omnivox sent it, so the session's model
    of the reply runs 2 s late with it. Speech while the caller hears it is speech over the reply
    (the carrier is told to stop it), not a new turn under a reply that plays on; once the marks
    say it has all played, the caller's words are a new turn."""
    call = CarrierStream("twilio", buffer_s=2.0)
    await call.open(stream_url(phone_cluster), signed(phone_cluster))
    side = await attach(phone_cluster)
    try:
        spoke_at = time.monotonic()
        await call.speak(np.concatenate([speech(WEATHER), silence(0.8)]), RATE)
        started = await side.wait_for("output_audio_buffer.started", timeout=30)
        started_at = time.monotonic()
        rid = started["response_id"]
        await asyncio.sleep(0.5)  # the caller is hearing it
        assert not side.of("output_audio_buffer.stopped")
        await call.speak(np.concatenate([speech(STORY), silence(1.0)]), RATE)
        cleared = await side.wait_for("output_audio_buffer.cleared", timeout=10)
        second = await side.wait_for("response.done", count=2, timeout=30)
        await side.wait_for("output_audio_buffer.stopped", response_id=second["response"]["id"], timeout=30)
        await call.speak(np.concatenate([speech(WEATHER), silence(1.0)]), RATE)  # after all of it
        third = await side.wait_for("response.done", count=3, timeout=30)
    finally:
        await call.stop()
        await call.close()
    assert cleared["response_id"] == rid
    # "started" is the carrier reaching the reply: not before its first sample played
    first_played = min(t for t, _ in call.play_log if t > spoke_at)
    assert started_at >= first_played - 0.1
    assert call.clears, "the carrier was never told to stop the reply the caller was still hearing"
    assert not [e for e in side.of("output_audio_buffer.stopped") if e["response_id"] == rid]
    # the words after the reply had all played were a new turn: no reply was cut for them
    assert len(side.of("output_audio_buffer.cleared")) == 1 and len(call.clears) == 1
    assert second["response"]["status"] == third["response"]["status"] == "completed"
