"""SIP call control end to end, as an application drives it: a real HTTP receiver takes the signed
``realtime.call.incoming`` webhook (it checks the Standard Webhooks signature itself, from the
spec) and the test accepts or rejects through the API; the caller gives up before the answer
(CANCEL); the model ends a call with the built-in ``end_call`` tool; omnivox dials out to Debian's
baresip set to auto-answer, and to SIP user agents that are busy, decline, only ring or are not
there; and SIP over TLS with a self-signed certificate made here.

The worker's LLM is the scripted OpenAI-compatible FAKE (``fake_openai_service``: offered tools
after a user turn, it calls the first, which on a call is ``end_call``), so each test knows what the
model does; ASR is PocketSphinx, TTS hibari.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import numpy as np
import pytest
import websockets
from aiosipua import SipUAS
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cluster import cluster, free_port
from fake_openai_service import FakeOpenAIService
from omnivox.bench.sip_caller import SipCaller
from omnivox.gateway.telephony.transports import UdpTransport
from rtclient import RATE, speech
from sipua import Baresip, nothing_held

AUTH = {"Authorization": "Bearer secret"}
SECRET = "whsec_" + base64.b64encode(b"a webhook secret of 32 bytes....").decode()
GREETING = "Hello, this is the bakery calling back!"
PROFILES = {"default": {}, "greet": {"greeting": GREETING}, "menu": {"send_dtmf": True, "end_call": False}}


class Receiver(BaseHTTPRequestHandler):
    """The application's webhook endpoint: keeps each event whose signature checks out."""

    events: ClassVar[list[dict]] = []
    forged = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        msg_id, ts = self.headers["webhook-id"], self.headers["webhook-timestamp"]
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        expected = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
        offered = [
            s.split(",", 1)[1] for s in self.headers["webhook-signature"].split() if s.startswith("v1,")
        ]
        fresh = abs(time.time() - int(ts)) < 300
        if fresh and any(hmac.compare_digest(expected.decode(), s) for s in offered):
            type(self).events.append(json.loads(body))
            self.send_response(200)
        else:
            type(self).forged += 1
            self.send_response(400)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def self_signed(tmp) -> tuple[str, str]:
    """A certificate for 127.0.0.1, made here (no network, no CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "omnivox test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def fake_llm():
    service = FakeOpenAIService().start()
    yield service
    service.stop()


@pytest.fixture(scope="module")
def control(tmp_path_factory, receiver, fake_llm):
    port, tls_port = free_port(), free_port()
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    rtp = 33000 + (port % 100) * 20
    env = {
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_SIP_PORT": str(port),
        "OMNIVOX_SIP_TLS_PORT": str(tls_port),
        "OMNIVOX_SIP_TLS_CERT": cert,
        "OMNIVOX_SIP_TLS_KEY": key,
        "OMNIVOX_SIP_ALLOW": json.dumps(["127.0.0.1/32"]),  # the trunk's address: no digest
        "OMNIVOX_SIP_WEBHOOK_URL": f"http://127.0.0.1:{receiver.server_address[1]}/calls",
        "OMNIVOX_SIP_WEBHOOK_SECRET": SECRET,
        "OMNIVOX_SIP_ANSWER_TIMEOUT_S": "5",
        "OMNIVOX_RTP_PORT_MIN": str(rtp),
        "OMNIVOX_RTP_PORT_MAX": str(rtp + 19),
        "OMNIVOX_PHONE_PROFILES": json.dumps(PROFILES),
        "OMNIVOX_LLM": "openai",
        "OMNIVOX_LLM_URL": f"{fake_llm.url}/v1",
        "OMNIVOX_ASR": "pocketsphinx",
    }
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("control"), **env) as c:
        c.sip_port, c.tls_port, c.cert = port, tls_port, cert  # type: ignore[attr-defined]
        yield c


@pytest.fixture(autouse=True)
def clean(control, fake_llm):
    control.wait_idle(1, timeout=20)
    Receiver.events.clear()
    fake_llm.state.requests.clear()
    yield
    control.wait_idle(1, timeout=20)
    nothing_held(control)
    assert Receiver.forged == 0


async def until(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def incoming(c, user: str = "agent") -> tuple[SipCaller, str]:
    """A Python phone calls; the webhook says so; its call id."""
    caller = SipCaller()
    await caller.dial(f"sip:{user}@127.0.0.1:{c.sip_port}", ("127.0.0.1", c.sip_port), wait=False)
    await until(lambda: Receiver.events, 10)
    event = Receiver.events[-1]
    assert event["type"] == "realtime.call.incoming"
    assert {"name": "To", "value": f"<sip:{user}@127.0.0.1:{c.sip_port}>"} in event["data"]["sip_headers"]
    return caller, event["data"]["call_id"]


def post(c, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(f"{c.url}/v1/realtime/calls/{path}", json=body or {}, headers=AUTH, timeout=60)


async def test_accepted_with_a_session_the_model_hears_the_caller_and_hangs_up_with_end_call(
    control, fake_llm
):
    caller, call_id = await incoming(control)
    try:
        assert (180, "INVITE") in caller.responses  # ringing while the application decides
        r = post(control, f"{call_id}/accept", {"type": "realtime", "instructions": "You are the test desk."})
        assert r.status_code == 200, r.text
        assert await caller.answered() == 200
        assert post(control, f"{call_id}/accept").json()["error"]["code"] == "call_state_conflict"
        await caller.speak(
            np.concatenate([speech("hello can you hear me"), np.zeros(RATE, np.float32)]), RATE
        )
        await asyncio.wait_for(caller.ended.wait(), 20)  # the model called end_call: omnivox's BYE
    finally:
        await caller.close()
    chats = [r for r in fake_llm.state.requests if r["path"] == "chat"]
    assert chats and chats[0]["messages"][0] == {"role": "system", "content": "You are the test desk."}
    assert [t["function"]["name"] for t in chats[0]["tools"]] == ["end_call"]


async def test_the_model_presses_keys_with_send_dtmf_and_the_caller_hears_them_as_rfc_4733_events(
    control, fake_llm
):
    fake_llm.state.tool_arguments = {"digits": "12#"}
    caller, call_id = await incoming(control, user="menu")  # its profile offers send_dtmf
    try:
        assert post(control, f"{call_id}/accept", {"type": "realtime"}).status_code == 200
        assert await caller.answered() == 200
        await caller.speak(np.concatenate([speech("press one two hash"), np.zeros(RATE, np.float32)]), RATE)
        await until(lambda: len(caller.keys) >= 3, 20)
        assert caller.keys == ["1", "2", "#"]
        caller.hang_up()
        await until(lambda: (200, "BYE") in caller.responses, 5)
    finally:
        fake_llm.state.tool_arguments = {"city": "Paris"}
        await caller.close()
    chats = [r for r in fake_llm.state.requests if r["path"] == "chat"]
    assert [t["function"]["name"] for t in chats[0]["tools"]] == ["send_dtmf"]


async def test_rejected_calls_get_the_status_and_unanswered_ones_480(control):
    caller, call_id = await incoming(control)
    try:
        bad = post(control, f"{call_id}/reject", {"status_code": 200})
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "status_code"
        assert post(control, f"{call_id}/reject", {"status_code": 486}).status_code == 200
        assert await caller.answered() == 486
    finally:
        await caller.close()
    assert post(control, f"{call_id}/accept").status_code == 404
    caller, call_id = await incoming(control)
    try:
        assert await caller.answered(10) == 480  # nobody decided within sip_answer_timeout_s
    finally:
        await caller.close()


async def test_a_caller_hanging_up_before_the_answer_cancels_the_call(control):
    caller, call_id = await incoming(control)
    try:
        assert control.metric("omnivox_rtp_ports_in_use") == 1
        caller.hang_up()  # CANCEL
        await until(lambda: (487, "INVITE") in caller.responses, 5)
    finally:
        await caller.close()
    await until(lambda: control.metric("omnivox_rtp_ports_in_use") == 0, 5)
    assert post(control, f"{call_id}/accept").status_code == 404


async def test_an_outbound_call_to_an_auto_answering_phone_gets_the_greeting(control, fake_llm, tmp_path):
    ua = Baresip(tmp_path / "callee", np.zeros(8000 * 30, np.float32), user="bob")
    try:
        body = {"to": f"sip:bob@127.0.0.1:{ua.sip_port}", "from": "+15550001111", "profile": "greet"}
        r = await asyncio.to_thread(post, control, "dial", body)
        assert r.status_code == 201, r.text
        call = r.json()
        assert (call["status"], call["direction"], call["to"]) == ("answered", "outbound", body["to"])
        await asyncio.to_thread(ua.wait_event, "CALL_ESTABLISHED")
        await until(lambda: any(r["path"] == "chat" for r in fake_llm.state.requests), 15)
        await asyncio.sleep(6)  # the greeting plays
        ua.command("hangup")  # the callee's BYE ends the call omnivox placed
        await until(lambda: control.metric("omnivox_sip_calls") == 0, 10)
    finally:
        ua.stop()
    chat = next(r for r in fake_llm.state.requests if r["path"] == "chat")
    assert GREETING in chat["messages"][0]["content"]  # the agent was told to greet
    audio, rate = ua.heard()
    assert (np.abs(audio) > 0.02).sum() > rate * 0.5  # over half a second of speech reached the callee
    assert control.metric("omnivox_sip_dials_total", outcome="answered") >= 1


class Callee:
    """A SIP user agent that does one thing with every INVITE (aiosipua's UAS)."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.cancelled = asyncio.Event()
        self.uas: SipUAS | None = None
        self.port = 0

    async def __aenter__(self) -> Callee:
        transport = UdpTransport(local_addr=("127.0.0.1", 0))
        self.uas = SipUAS(transport)
        self.uas.on_invite = self._invite
        self.uas.on_cancel = lambda request, addr: self.cancelled.set()
        await self.uas.start()
        self.port = transport._udp_transport.get_extra_info("sockname")[1]
        return self

    def _invite(self, call) -> None:
        if self.behaviour == "busy":
            call.reject(486)
        elif self.behaviour == "decline":
            call.reject(603)
        else:
            call.ringing()  # and never answers

    async def __aexit__(self, *exc: object) -> None:
        assert self.uas is not None
        await self.uas.stop()


@pytest.mark.parametrize(
    ("behaviour", "outcome", "status"),
    [("busy", "busy", 486), ("decline", "rejected", 603), ("ring", "no_answer", None)],
)
async def test_dials_that_fail_say_how(control, behaviour, outcome, status):
    async with Callee(behaviour) as callee:
        body = {"to": f"sip:bob@127.0.0.1:{callee.port}", "timeout_s": 2}
        r = await asyncio.to_thread(post, control, "dial", body)
        if behaviour == "ring":
            await asyncio.wait_for(callee.cancelled.wait(), 5)  # omnivox gave up: a CANCEL
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert (error["code"], error["outcome"], error.get("sip_status")) == ("dial_failed", outcome, status)


async def test_a_dial_nobody_answers_times_out_and_bad_requests_are_refused(control):
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        r = await asyncio.to_thread(
            post, control, "dial", {"to": f"sip:x@127.0.0.1:{silent.getsockname()[1]}", "timeout_s": 2}
        )
        invites = 0
        silent.settimeout(0.1)
        while True:
            try:
                invites += silent.recv(65536).startswith(b"INVITE ")
            except TimeoutError:
                break
    finally:
        silent.close()
    assert r.status_code == 502 and r.json()["error"]["outcome"] == "timeout"
    assert invites >= 3  # sent again and again over UDP (0.5 s, 1 s, ...)
    unknown = await asyncio.to_thread(post, control, "dial", {"to": "sip:x@nowhere.invalid", "timeout_s": 2})
    assert unknown.status_code == 502 and unknown.json()["error"]["outcome"] == "unreachable"
    for body, param in (
        ({"to": "+15550001111"}, "to"),  # a number, and no trunk configured
        ({"to": "http://x"}, "to"),
        ({"to": "sip:x@127.0.0.1", "profile": "nope"}, "profile"),
        ({"to": "sip:x@127.0.0.1", "from": "a b"}, "from"),
        ({"to": "sip:x@127.0.0.1", "timeout_s": 0}, "timeout_s"),
        ({"to": "sip:x@127.0.0.1", "session": {"audio": 5}}, None),
    ):
        r = post(control, "dial", body)
        assert r.status_code == 422, (body, r.text)
        if param:
            assert r.json()["error"]["param"] == param
    assert (
        httpx.post(f"{control.url}/v1/realtime/calls/dial", json={"to": "sip:x@127.0.0.1"}).status_code == 401
    )


async def test_a_dial_that_does_not_wait_tells_its_sideband_how_it_failed(control):
    async with Callee("ring") as callee:
        r = post(control, "dial", {"to": f"sip:bob@127.0.0.1:{callee.port}", "timeout_s": 2, "wait": False})
        assert r.status_code == 201 and r.json()["status"] == "ringing"
        ws = await websockets.connect(
            f"{control.ws}/v1/realtime?call_id={r.json()['call_id']}", additional_headers=AUTH
        )
        event = json.loads(await asyncio.wait_for(ws.recv(), 10))
        await ws.close()
    assert event["type"] == "error"
    assert (event["error"]["code"], event["error"]["outcome"]) == ("dial_failed", "no_answer")


def tls_exchange(c, request: bytes, read_until: bytes) -> bytes:
    context = ssl.create_default_context(cafile=c.cert)  # the self-signed certificate is the CA
    with socket.create_connection(("127.0.0.1", c.tls_port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(request)
            got = b""
            while read_until not in got:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                got += chunk
            return got


async def test_sip_over_tls_rings_and_is_refused_through_the_api(control):
    me = free_port()
    sdp = (
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        f"m=audio {me} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
    )
    invite = (
        f"INVITE sip:agent@127.0.0.1:{control.tls_port};transport=tls SIP/2.0\r\n"
        f"Via: SIP/2.0/TLS 127.0.0.1:{me};branch=z9hG4bK{time.monotonic_ns()}\r\n"
        "Max-Forwards: 70\r\nFrom: <sip:x@127.0.0.1>;tag=t1\r\n"
        f"To: <sip:agent@127.0.0.1>\r\nCall-ID: tls{time.monotonic_ns()}\r\nCSeq: 1 INVITE\r\n"
        f"Contact: <sip:x@127.0.0.1:{me};transport=tls>\r\nContent-Type: application/sdp\r\n"
        f"Content-Length: {len(sdp)}\r\n\r\n{sdp}"
    ).encode()

    async def refuse_when_it_rings() -> None:
        await until(lambda: Receiver.events, 10)
        post(control, f"{Receiver.events[-1]['data']['call_id']}/reject", {"status_code": 603})

    refusing = asyncio.create_task(refuse_when_it_rings())
    got = await asyncio.to_thread(tls_exchange, control, invite, b"SIP/2.0 603")
    await refusing
    assert b"SIP/2.0 180 Ringing" in got and b"SIP/2.0 603" in got
    # a client that does not speak TLS only loses its connection
    with socket.create_connection(("127.0.0.1", control.tls_port), timeout=10) as plain:
        plain.sendall(b"INVITE sip:agent@127.0.0.1 SIP/2.0\r\n\r\n")
        try:
            answer = plain.recv(100)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"SIP/2.0")  # a TLS alert at most, then the connection closes
    assert httpx.get(control.url + "/health").status_code == 200
