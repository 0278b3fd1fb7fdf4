"""SIP calls end to end: Debian's baresip (``sipua.Baresip``) calls a real gateway (``--sip-port``)
and cascade worker on loopback, speaks a question from a WAV file and records the answer.

The gateway has a client key, so a caller needs SIP digest credentials (``sip_users``): baresip
answers the 401 challenge with them; a raw INVITE without them is challenged, one with wrong ones
gets 403 and never a session. The worker is the cascade with the echo LLM and PocketSphinx.
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
from omnivox.voice.asr.base import word_error_rate
from omnivox.voice.asr.pocketsphinx_asr import PocketsphinxAsr
from rtclient import RATE, speech
from sipua import Baresip

WEATHER = "what is the weather like in paris today"
AUTH = {"Authorization": "Bearer secret"}


@pytest.fixture(scope="module")
def sip_cluster(tmp_path_factory):
    port = free_port()
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_SIP_PORT": str(port),
        "OMNIVOX_SIP_USERS": json.dumps({"trunk": "pw"}),
        "OMNIVOX_RTP_PORT_MIN": "31000",
        "OMNIVOX_RTP_PORT_MAX": "31100",
        **ECHO_VOICE,
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("sip"), **env) as c:
        c.sip_port = port  # type: ignore[attr-defined]
        yield c


@pytest.fixture(autouse=True)
def idle_worker(sip_cluster):
    sip_cluster.wait_idle(1, timeout=20)


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


async def test_the_caller_hanging_up_ends_the_session_and_frees_the_worker(sip_cluster, tmp_path):
    ua = Baresip(tmp_path / "ua", question(seconds_after=1.0), auth=("trunk", "pw"))
    try:
        ua.command("dial", f"sip:agent@127.0.0.1:{sip_cluster.sip_port}")
        await asyncio.to_thread(ua.wait_event, "CALL_ESTABLISHED")
        await until(lambda: calls(sip_cluster))
        ua.command("hangup")
        await until(lambda: not calls(sip_cluster))
    finally:
        ua.stop()
    sip_cluster.wait_idle(1, timeout=15)


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
    assert " 401 " in await asyncio.to_thread(raw_invite, port)
    wrong = 'Digest username="trunk", realm="omnivox", nonce="1.x", uri="sip:agent@127.0.0.1", response="00"'
    assert " 403 " in await asyncio.to_thread(raw_invite, port, wrong)
    assert await asyncio.to_thread(raw_invite, port, None, None, b"\x00\xff garbage not sip") == "no answer"
    assert await asyncio.to_thread(raw_invite, port, None, None, b"INVITE nonsense\r\n\r\n") == "no answer"
    assert not calls(sip_cluster)
    r = httpx.get(sip_cluster.url + "/health")  # the gateway still serves
    assert r.status_code == 200
