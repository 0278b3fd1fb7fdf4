"""SIP calls end to end: Debian's baresip (``sipua.Baresip``) calls a real gateway (``--sip-port``)
and cascade worker on loopback, speaks a question from a WAV file and records the answer; the
Python phone of the benchmarks (``bench.sip_caller``) does what baresip cannot be told to (a hold
and a bad re-INVITE, RTP floods and a stranger's packets, calls to other agent profiles).

The gateway has a client key, so a caller needs SIP digest credentials (``sip_users``): baresip
answers the 401 challenge with them; a raw INVITE without them is challenged, one with wrong ones
gets 403 and never a session. The worker is the cascade with the echo LLM and PocketSphinx; the
gateway records every session. After each call the worker is free and no RTP port is held.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import numpy as np
import pytest
import websockets

from cluster import ECHO_VOICE, cluster, free_port
from omnivox.audio.resample import resample
from omnivox.bench.sip_caller import SipCaller
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
from recordings import finished
from rtclient import RATE, speech
from sipua import Baresip, nothing_held

WEATHER = "what is the weather like in paris today"
AUTH = {"Authorization": "Bearer secret"}
CREDENTIALS = ("trunk", "pw")
PROFILES = {
    "default": {},
    "greet": {"greeting": "Hello, thanks for calling the bakery!"},
    "idle": {"idle_timeout_s": 2},
}


@pytest.fixture(scope="module")
def sip_cluster(tmp_path_factory):
    port = free_port()
    rtp = 31000 + (port % 200) * 20  # a range of its own: another run on this machine has another
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_SIP_PORT": str(port),
        "OMNIVOX_SIP_USERS": json.dumps(dict([CREDENTIALS])),
        "OMNIVOX_RTP_PORT_MIN": str(rtp),
        "OMNIVOX_RTP_PORT_MAX": str(rtp + 19),
        "OMNIVOX_PHONE_PROFILES": json.dumps(PROFILES),
        "OMNIVOX_RECORD_SESSIONS": "true",
        "OMNIVOX_DATA_DIR": str(tmp_path_factory.mktemp("sip-data")),
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
        **ECHO_VOICE,
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("sip"), **env) as c:
        c.sip_port = port  # type: ignore[attr-defined]
        yield c


@pytest.fixture(autouse=True)
def idle_worker(sip_cluster):
    sip_cluster.wait_idle(1, timeout=20)
    yield
    # however the test's call ended: the worker is free again and no RTP port or call is held
    sip_cluster.wait_idle(1, timeout=20)
    nothing_held(sip_cluster)


def calls(c) -> list[dict]:
    return [
        s
        for s in httpx.get(c.url + "/api/sessions", headers=AUTH).json()["sessions"]
        if s["session_id"].startswith("rtc")
    ]


def question(seconds_after: float = 14.0) -> np.ndarray:
    """The caller's microphone: a pause, the question, then silence while the answer plays."""
    spoken = resample(speech(WEATHER), RATE, 8000)
    return np.concatenate(
        [np.zeros(4000, np.float32), spoken, np.zeros(int(8000 * seconds_after), np.float32)]
    )


async def until(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)


async def sideband(c, call_id: str) -> tuple[object, list[dict], asyncio.Task]:
    ws = await websockets.connect(f"{c.ws}/v1/realtime?call_id={call_id}", additional_headers=AUTH)
    events: list[dict] = []

    async def read() -> None:
        try:
            async for raw in ws:
                events.append(json.loads(raw))
        except websockets.ConnectionClosed:
            pass

    return ws, events, asyncio.create_task(read())


async def test_a_sip_caller_asks_a_question_and_hears_the_answer(sip_cluster, tmp_path):
    ua = Baresip(tmp_path / "ua", question(), auth=("trunk", "pw"))
    try:
        ua.command("dial", f"sip:agent@127.0.0.1:{sip_cluster.sip_port}")
        await asyncio.to_thread(ua.wait_event, "CALL_ESTABLISHED")
        await until(lambda: calls(sip_cluster))
        call_id = calls(sip_cluster)[0]["session_id"]
        ws, events, reader = await sideband(sip_cluster, call_id)
        await until(lambda: any(e["type"] == "output_audio_buffer.stopped" for e in events), 40)
        ua.command("sndcode", "5")
        await until(lambda: any(e["type"] == "input_audio_buffer.dtmf_event_received" for e in events), 10)
        # the API hangs up: omnivox sends BYE, the session ends and the worker is free
        r = httpx.post(f"{sip_cluster.url}/v1/realtime/calls/{call_id}/hangup", headers=AUTH)
        assert r.status_code == 200
        await asyncio.to_thread(ua.wait_event, "CALL_CLOSED")
        await until(lambda: not calls(sip_cluster))
        reader.cancel()
        await ws.close()
    finally:
        ua.stop()
    sip_cluster.wait_idle(1, timeout=15)
    heard = next(e for e in events if e["type"] == "conversation.item.input_audio_transcription.completed")
    assert word_error_rate(WEATHER, heard["transcript"]) <= 0.5  # PocketSphinx on 8 kHz G.711
    dtmf = next(e for e in events if e["type"] == "input_audio_buffer.dtmf_event_received")
    assert dtmf["event"] == "5"
    audio, rate = ua.heard()
    loud = np.abs(audio) > 0.02
    assert loud.sum() > rate * 0.5  # over half a second of speech came back over RTP
    answer = PocketsphinxAsr().transcribe(resample(audio, rate, 16000)).text
    assert "said" in answer.split() or word_error_rate(f"you said {heard['transcript']}", answer) < 0.8
    # the recording has both sides: the caller's words as a user turn, the agent's reply after it
    detail = await asyncio.to_thread(finished, sip_cluster.url, call_id, AUTH)
    turns = detail["timeline"]["turns"]
    users = [t for t in turns if t["role"] == "user" and t.get("text")]
    assert users and word_error_rate(WEATHER, users[0]["text"]) <= 0.5, turns
    assert any(t["role"] == "assistant" and "said" in (t.get("text") or "").lower() for t in turns), turns
    files = httpx.get(f"{sip_cluster.url}/api/recordings/{call_id}/replay.wav", headers=AUTH)
    assert files.status_code == 200 and len(files.content) > 24000 * 4  # over a second of stereo audio


async def test_the_caller_hanging_up_ends_the_session_and_frees_the_worker(sip_cluster, tmp_path):
    ua = Baresip(tmp_path / "ua", question(seconds_after=1.0), auth=("trunk", "pw"))
    try:
        ua.command("dial", f"sip:agent@127.0.0.1:{sip_cluster.sip_port}")
        await asyncio.to_thread(ua.wait_event, "CALL_ESTABLISHED")
        await until(lambda: calls(sip_cluster))
        assert sip_cluster.metric("omnivox_rtp_ports_in_use") == 1
        ua.command("hangup")
        await until(lambda: not calls(sip_cluster))
    finally:
        ua.stop()
    sip_cluster.wait_idle(1, timeout=15)  # and the fixture: no RTP port held


async def test_a_transfer_sends_a_refer(sip_cluster, tmp_path):
    ua = Baresip(tmp_path / "ua", question(), auth=("trunk", "pw"))
    try:
        ua.command("dial", f"sip:agent@127.0.0.1:{sip_cluster.sip_port}")
        await asyncio.to_thread(ua.wait_event, "CALL_ESTABLISHED")
        await until(lambda: calls(sip_cluster))
        call_id = calls(sip_cluster)[0]["session_id"]
        bad = httpx.post(
            f"{sip_cluster.url}/v1/realtime/calls/{call_id}/refer",
            json={"target_uri": "http://x"},
            headers=AUTH,
        )
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "target_uri"
        r = httpx.post(
            f"{sip_cluster.url}/v1/realtime/calls/{call_id}/refer",
            json={"target_uri": "sip:sales@127.0.0.1:5999"},
            headers=AUTH,
        )
        assert r.status_code == 200
        await until(lambda: "sales@127.0.0.1" in ua.log_text(), 10)
    finally:
        ua.stop()
    assert "transferring call to" in ua.log_text().lower() or "refer" in ua.log_text().lower()


def raw_invite(
    port: int, authorization: str | None = None, body: str | None = None, garbage: bytes | None = None
) -> str:
    """Send one INVITE (or bytes) over UDP from loopback; the first answer's status line."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(3)
        me = s.getsockname()[1]
        sdp = (
            body
            if body is not None
            else (
                "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
                f"m=audio {me + 2} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
            )
        )
        lines = [
            f"INVITE sip:agent@127.0.0.1:{port} SIP/2.0",
            f"Via: SIP/2.0/UDP 127.0.0.1:{me};branch=z9hG4bK{time.monotonic_ns()}",
            "Max-Forwards: 70",
            f"From: <sip:x@127.0.0.1:{me}>;tag=abc",
            f"To: <sip:agent@127.0.0.1:{port}>",
            f"Call-ID: {time.monotonic_ns()}@test",
            "CSeq: 1 INVITE",
            f"Contact: <sip:x@127.0.0.1:{me}>",
            "Content-Type: application/sdp",
            *([f"Authorization: {authorization}"] if authorization else []),
            f"Content-Length: {len(sdp)}",
            "",
            sdp,
        ]
        s.sendto(garbage if garbage is not None else "\r\n".join(lines).encode(), ("127.0.0.1", port))
        while True:
            try:
                data = s.recv(65536).decode(errors="replace")
            except TimeoutError:
                return "no answer"
            status = data.split("\r\n", 1)[0]
            if " 100 " not in status:
                return status


async def test_unauthenticated_and_malformed_invites_never_become_sessions(sip_cluster):
    port = sip_cluster.sip_port
    refused = sip_cluster.metric("omnivox_sip_refused_total", status="403")
    assert " 401 " in await asyncio.to_thread(raw_invite, port)
    wrong = 'Digest username="trunk", realm="omnivox", nonce="1.x", uri="sip:agent@127.0.0.1", response="00"'
    assert " 403 " in await asyncio.to_thread(raw_invite, port, wrong)
    assert await asyncio.to_thread(raw_invite, port, None, None, b"\x00\xff garbage not sip") == "no answer"
    assert await asyncio.to_thread(raw_invite, port, None, None, b"INVITE nonsense\r\n\r\n") == "no answer"
    assert not calls(sip_cluster)
    assert sip_cluster.metric("omnivox_sip_refused_total", status="403") == refused + 1
    r = httpx.get(sip_cluster.url + "/health")  # the gateway still serves
    assert r.status_code == 200


async def phone(c, user: str = "agent") -> SipCaller:
    """The Python phone, called through to the agent ``user`` (answered)."""
    caller = SipCaller()
    status = await caller.dial(f"sip:{user}@127.0.0.1:{c.sip_port}", ("127.0.0.1", c.sip_port), CREDENTIALS)
    assert status == 200, caller.responses
    return caller


async def ask(caller: SipCaller, seconds: float = 20.0) -> float | None:
    """Say the question; when the reply's first sound arrived (None: no reply in ``seconds``)."""
    spoken = await caller.speak(np.concatenate([speech(WEATHER), np.zeros(RATE // 2, np.float32)]), RATE)
    for _ in range(int(seconds * 10)):
        if (heard := caller.first_sound_after(spoken - 0.5)) is not None:
            return heard
        await asyncio.sleep(0.1)
    return None


async def test_the_agent_greets_first_when_the_profile_says_so(sip_cluster):
    caller = await phone(sip_cluster, "greet")
    answered = time.monotonic()
    try:
        await until(lambda: caller.first_sound_after(answered) is not None, 15)
        call_id = calls(sip_cluster)[0]["session_id"]
        caller.hang_up()
    finally:
        await caller.close()
    detail = await asyncio.to_thread(finished, sip_cluster.url, call_id, AUTH)
    turns = detail["timeline"]["turns"]
    assert turns and turns[0]["role"] == "assistant", turns  # it spoke before the caller said a word


async def test_nobody_speaking_hangs_up_after_the_profiles_idle_timeout(sip_cluster):
    caller = await phone(sip_cluster, "idle")  # idle_timeout_s 2
    try:
        assert calls(sip_cluster)
        await asyncio.wait_for(caller.ended.wait(), 10)  # omnivox's BYE
    finally:
        await caller.close()
    await until(lambda: not calls(sip_cluster))


async def test_a_hold_is_answered_and_a_bad_reinvite_refused_and_the_call_goes_on(sip_cluster):
    caller = await phone(sip_cluster)
    try:
        caller.reinvite("sendonly")  # hold
        await until(lambda: caller.responses.count((200, "INVITE")) >= 2, 5)
        caller.reinvite("sendrecv", codecs=[(9, "G722")])  # nothing omnivox speaks
        await until(lambda: (488, "INVITE") in caller.responses, 5)
        caller.reinvite("sendrecv", codecs=[(8, "PCMA")])  # G.711, but not the PCMU this call speaks
        await until(lambda: caller.responses.count((488, "INVITE")) >= 2, 5)
        caller.reinvite("sendrecv")  # back from hold
        await until(lambda: caller.responses.count((200, "INVITE")) >= 3, 5)
        assert await ask(caller) is not None, "no reply after the hold"
        caller.hang_up()
        await until(lambda: not calls(sip_cluster))
    finally:
        await caller.close()


async def test_rtp_floods_strangers_and_junk_are_dropped_counted_and_the_call_goes_on(sip_cluster):
    before = {
        r: sip_cluster.metric("omnivox_rtp_dropped_packets_total", reason=r)
        for r in ("foreign", "malformed", "flooded")
    }
    caller = await phone(sip_cluster)
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.bind(("127.0.0.1", 0))
    try:
        await asyncio.sleep(0.3)  # the caller's own RTP is flowing
        junk = bytes([0x80, 0]) + bytes(10) + b"\xff" * 160  # RTP from someone the SDP did not name
        for _ in range(20):
            caller.raw(junk, stranger)
        for data in (b"\x00 not rtp", b"\x80", bytes([0x80, 99]) + bytes(170)):  # junk, short, PT 99
            caller.raw(data)
        for _ in range(400):  # 8 seconds' worth at once
            caller.raw(bytes([0x80, 0]) + bytes(10) + b"\xff" * 160)
        await asyncio.sleep(1.2)  # the flood's second is over
        assert await ask(caller) is not None, "the call did not survive the flood"
        caller.hang_up()
        await until(lambda: not calls(sip_cluster))
    finally:
        stranger.close()
        await caller.close()
    after = {r: sip_cluster.metric("omnivox_rtp_dropped_packets_total", reason=r) for r in before}
    assert after["foreign"] - before["foreign"] >= 20
    assert after["malformed"] - before["malformed"] >= 2
    assert after["flooded"] - before["flooded"] >= 50  # (the kernel's socket buffer drops some first)
