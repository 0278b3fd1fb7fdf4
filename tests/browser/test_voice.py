"""The live voice page (/voice).

The conversation test runs against real processes (`/v1/realtime` on the cascade engine: server VAD,
ASR, the echo LLM and hibari TTS) with Chromium's fake microphone saying a sentence. The others pin
down how the page reacts to what a server may do (interrupt, refuse, drop the connection) with a
scripted `/v1/realtime` in the browser (Playwright's WebSocket routing), so they need no engine.
"""

from __future__ import annotations

import base64
import json
import re
import time

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect

from cluster import ECHO_VOICE, cluster

pytestmark = pytest.mark.browser


# the page talks WebRTC by default; these tests pick the WebSocket where they mean it
WEBSOCKET = "localStorage.setItem('omnivox.transport', 'websocket');"
LOOPBACK = {"OMNIVOX_WEBRTC_HOST_ADDRESSES": '["127.0.0.1"]'}  # calls stay on this machine


@pytest.fixture(scope="module")
def cascade(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    with cluster(workers=1, engine="cascade", log_dir=logs, **ECHO_VOICE, **LOOPBACK) as c:
        yield c


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    with cluster(workers=1, log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def start(page) -> None:
    page.get_by_role("button", name="Start conversation").click()


def test_live_voice_conversation(cascade, open_page, screenshot):
    page = open_page(cascade.url + "/voice", init_script=WEBSOCKET)
    expect(page.get_by_label("Voice", exact=True)).to_have_value("heart")  # from GET /v1/voices
    start(page)
    expect(page.get_by_role("button", name="Stop conversation")).to_be_visible()
    transcript = page.locator("#transcript")
    user = transcript.locator(".line.user").first
    expect(user).to_contain_text("weather", timeout=30_000)
    expect(user).to_contain_text("paris")
    expect(page.locator("#latencies li").first).to_have_text(re.compile(r"Turn 1: \d+ ms"), timeout=30_000)
    expect(transcript.locator(".line.assistant").first).to_contain_text("weather", timeout=30_000)
    page.wait_for_function(
        "omnivox.player.stats.played > 12000 && omnivox.player.stats.peak > 0.01", timeout=30_000
    )  # half a second of the spoken reply went to the speakers, and it was not silence
    assert page.evaluate("omnivox.latencies.length") >= 1
    # measured from the end of the speech, so it holds the 500 ms of silence the server waits for
    # (and, on a busy test machine, not much more than a few seconds)
    assert 500 <= page.evaluate("omnivox.latencies[0]") < 5000
    screenshot(page, "voice")
    sessions = httpx.get(cascade.url + "/api/sessions").json()
    assert [s["kind"] for s in sessions["sessions"]] == ["realtime"]

    page.get_by_role("button", name="Stop conversation").click()
    expect(page.get_by_role("button", name="Start conversation")).to_be_visible()
    deadline = time.monotonic() + 10
    while httpx.get(cascade.url + "/api/sessions").json()["active_sessions"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert httpx.get(cascade.url + "/api/sessions").json() == {"active_sessions": 0, "sessions": []}


def test_live_voice_conversation_over_webrtc(cascade, open_page, screenshot):
    page = open_page(cascade.url + "/voice")
    expect(page.get_by_label("Connection")).to_have_value("webrtc")  # the default
    start(page)
    transcript = page.locator("#transcript")
    expect(transcript.locator(".line.user").first).to_contain_text("weather", timeout=30_000)
    expect(transcript.locator(".line.assistant").first).to_contain_text("weather", timeout=30_000)
    expect(page.locator("#latencies li").first).to_have_text(re.compile(r"Turn 1: \d+ ms"), timeout=30_000)
    # the reply came back on the call's audio track, and it was not silence
    page.wait_for_function(
        "omnivox.callStats().then(s => s && s.packets > 50 && s.energy > 0)", polling=200, timeout=30_000
    )
    page.wait_for_function("omnivox.playback.some(([state]) => state === 'stopped')", timeout=30_000)
    states = [state for state, _ in page.evaluate("omnivox.playback")]
    assert states.index("started") < states.index("stopped")
    assert page.evaluate("omnivox.player.stats.played") == 0  # nothing went through the WebSocket player
    screenshot(page, "voice-webrtc")
    sessions = httpx.get(cascade.url + "/api/sessions").json()["sessions"]
    assert [s["kind"] for s in sessions] == ["realtime"]
    page.get_by_role("button", name="Stop conversation").click()
    deadline = time.monotonic() + 10
    while httpx.get(cascade.url + "/api/sessions").json()["active_sessions"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert httpx.get(cascade.url + "/api/sessions").json()["active_sessions"] == 0


DENY_MICROPHONE = """
navigator.mediaDevices.getUserMedia = () =>
  Promise.reject(new DOMException("Permission denied", "NotAllowedError"));
"""


def test_no_microphone_permission_is_explained(echo, open_page):
    page = open_page(echo.url + "/voice", init_script=DENY_MICROPHONE)
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    start(page)
    expect(page.get_by_role("alert")).to_contain_text("Microphone permission was denied")
    expect(page.get_by_role("button", name="Start conversation")).to_be_visible()
    assert sockets == []  # nothing was sent anywhere


def tone(seconds: float, rate: int = 24000) -> list[str]:
    """A 440 Hz tone as base64 PCM16 deltas of 100 ms."""
    t = np.arange(int(seconds * rate)) / rate
    pcm = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    step = rate // 10
    return [base64.b64encode(pcm[i : i + step].tobytes()).decode() for i in range(0, len(pcm), step)]


class ScriptedRealtime:
    """A stand-in for `/v1/realtime` inside the page: it answers session.update and records events.

    ``behaviour(route, n)`` runs for the n-th connection (from 1) once the session is configured."""

    def __init__(self, behaviour=None) -> None:
        self.routes: list = []
        self.received: list[dict] = []
        self.behaviour = behaviour
        self.configured: set[int] = set()

    def install(self, page) -> None:
        page.route_web_socket("**/v1/realtime?*", self.connect)

    def connect(self, route) -> None:
        self.routes.append(route)
        n = len(self.routes)
        route.on_message(lambda raw: self.message(route, n, json.loads(raw)))
        self.send(route, "session.created", session={"type": "realtime", "id": f"sess_{n}"})

    def message(self, route, n: int, event: dict) -> None:
        self.received.append(event)
        if event["type"] == "session.update":
            self.send(route, "session.updated", session=event["session"])
            if self.behaviour and n not in self.configured:
                self.behaviour(route, n)
            self.configured.add(n)

    @staticmethod
    def send(route, type_: str, **fields) -> None:
        route.send(json.dumps({"type": type_, "event_id": f"ev_{time.monotonic_ns()}", **fields}))


def reply(route, seconds: float = 4.0) -> None:
    """A user turn and the start of a long spoken reply."""
    send = ScriptedRealtime.send
    send(route, "input_audio_buffer.speech_started", audio_start_ms=100, item_id="item_u1")
    send(route, "input_audio_buffer.speech_stopped", audio_end_ms=900, item_id="item_u1")
    send(
        route,
        "conversation.item.input_audio_transcription.completed",
        item_id="item_u1",
        content_index=0,
        transcript="tell me a long story",
    )
    send(route, "response.created", response={"id": "resp_1", "status": "in_progress"})
    for delta in tone(seconds):
        send(
            route,
            "response.output_audio.delta",
            response_id="resp_1",
            item_id="item_a1",
            output_index=0,
            content_index=0,
            delta=delta,
        )
    send(
        route,
        "response.output_audio_transcript.delta",
        response_id="resp_1",
        item_id="item_a1",
        output_index=0,
        content_index=0,
        delta="Once upon a time",
    )


def test_barge_in_drops_queued_reply_audio_at_once(echo, open_page, screenshot):
    server = ScriptedRealtime(behaviour=lambda route, n: reply(route))
    page = open_page(echo.url + "/voice", route=server.install, init_script=WEBSOCKET)
    start(page)
    expect(page.locator("#transcript .line.user")).to_contain_text("tell me a long story")
    expect(page.locator("#transcript .line.assistant")).to_contain_text("Once upon a time")
    expect(page.locator("#latencies li")).to_have_count(1)
    page.wait_for_function("omnivox.player.stats.played > 2400 && omnivox.player.stats.buffered > 24000")
    # the user talks over the reply: the page drops the queued audio without waiting for the server
    route = server.routes[0]
    ScriptedRealtime.send(route, "input_audio_buffer.speech_started", audio_start_ms=2000, item_id="item_u2")
    page.wait_for_function("omnivox.player.stats.clears === 1 && omnivox.player.stats.buffered === 0")
    ScriptedRealtime.send(route, "response.done", response={"id": "resp_1", "status": "cancelled"})
    expect(page.locator("#transcript .line.assistant")).to_contain_text("(interrupted)")
    expect(page.locator("#transcript")).to_contain_text("you interrupted")
    stats = page.evaluate("omnivox.player.stats")
    assert stats["dropped"] > 24000 and stats["played"] < stats["received"], stats
    # what the page sent: the session set up as asked, then microphone audio
    update = next(e for e in server.received if e["type"] == "session.update")
    audio_in = update["session"]["audio"]["input"]
    assert audio_in["format"] == {"type": "audio/pcm", "rate": 24000}
    assert audio_in["turn_detection"]["type"] == "server_vad"
    assert any(e["type"] == "input_audio_buffer.append" for e in server.received)
    screenshot(page, "voice-interrupted")


def test_capacity_refusal_is_explained(echo, open_page):
    def refuse(route) -> None:
        error = {"type": "invalid_request_error", "code": "session_limit_reached", "message": "all busy"}
        ScriptedRealtime.send(route, "error", error=error)
        route.close(code=1008, reason="session_limit_reached")

    page = open_page(
        echo.url + "/voice",
        route=lambda p: p.route_web_socket("**/v1/realtime?*", refuse),
        init_script=WEBSOCKET,
    )
    start(page)
    expect(page.get_by_role("alert")).to_contain_text("at capacity")
    expect(page.get_by_role("button", name="Reconnect")).to_be_visible()
    expect(page.get_by_role("button", name="Start conversation")).to_be_visible()


def test_lost_connection_is_retried(echo, open_page):
    def drop_first(route, n: int) -> None:
        if n == 1:
            route.close(code=1011, reason="worker lost")

    server = ScriptedRealtime(behaviour=drop_first)
    page = open_page(echo.url + "/voice", route=server.install, init_script=WEBSOCKET)
    start(page)
    expect(page.locator("#transcript")).to_contain_text("connection lost")
    expect(page.locator("#voice-status")).to_contain_text("Listening", timeout=10_000)
    assert len(server.routes) == 2
    expect(page.get_by_role("button", name="Stop conversation")).to_be_visible()
    page.get_by_role("button", name="Stop conversation").click()
    expect(page.get_by_role("alert")).to_be_hidden()
