"""The full-duplex pages (/duplex: audio, /omni: audio and camera).

The conversation, pause/resume, queue and omni tests run against real processes (`/ws/duplex` on the
cascade engine: VAD, ASR, the echo LLM and hibari TTS) with Chromium's fake microphone saying a
question and its fake camera (a test pattern). What a real server cannot be made to do on cue (yield
mid-reply with audio still queued, drop the connection, let a pause run out) is played by a scripted
`/ws/duplex` inside the browser (Playwright's WebSocket routing), as test_voice does.
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

from cluster import cluster
from omnivox.video.frames import decode_image_b64, image_format_b64

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def dx(tmp_path_factory):
    with cluster(
        workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("logs"), OMNIVOX_LLM="echo"
    ) as c:
        yield c


def start(page) -> None:
    page.get_by_role("button", name="Start session").click()


def stop(page) -> None:
    page.get_by_role("button", name="Stop session").click()
    expect(page.get_by_role("button", name="Start session")).to_be_visible()


def worker_state(c) -> str:
    return httpx.get(c.url + "/api/workers", timeout=2).json()["workers"][0]["state"]


def wait_for(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def wait_idle(c) -> None:
    """The page's stop reached the worker: no session left, the worker free again."""
    wait_for(lambda: httpx.get(c.url + "/api/sessions").json()["active_sessions"] == 0)
    c.wait_idle(1, timeout=15)


# ---- against the real server


def test_duplex_conversation(dx, open_page, screenshot):
    page = open_page(dx.url + "/duplex")
    start(page)
    expect(page.get_by_role("button", name="Stop session")).to_be_visible()
    expect(page.locator("#duplex-status")).to_contain_text("Live", timeout=20_000)
    assert worker_state(dx) == "DUPLEX_ACTIVE"
    # the echo LLM says the question back: the model's words reach the transcript
    said = page.locator("#transcript .line.assistant").first
    expect(said).to_contain_text("You said", timeout=40_000)
    expect(said).to_contain_text("weather")
    # the units are on the timeline, listening first (three are forced), then speaking
    timeline = page.locator("#timeline")
    expect(timeline.locator(".unit.speak").first).to_be_visible()
    listen = timeline.locator(".unit.listen").first
    expect(listen).to_have_attribute("title", re.compile(r"^Unit 0: listened, \d+ ms"))
    expect(timeline.locator(".unit.speak").first).to_contain_text(re.compile(r"\d+ ms"))
    page.wait_for_function(
        "omnivox.player.stats.played > 12000 && omnivox.player.stats.peak > 0.01", timeout=30_000
    )  # half a second of the spoken reply went to the speakers, and it was not silence
    units = page.evaluate("omnivox.units")
    assert [u["unit_index"] for u in units] == list(range(len(units)))
    assert all(u["is_listen"] for u in units[:3])
    expect(page.locator("#duplex-figures .stat", has_text="Units")).to_contain_text(re.compile(r"\d+"))
    expect(page.get_by_role("alert")).to_be_hidden()
    screenshot(page, "duplex")
    sessions = httpx.get(dx.url + "/api/sessions").json()["sessions"]
    assert [s["kind"] for s in sessions] == ["duplex"]

    stop(page)
    expect(page.locator("#duplex-status")).to_contain_text(re.compile(r"ended after \d+ units"))
    wait_idle(dx)


def test_pause_and_resume(dx, open_page):
    page = open_page(dx.url + "/duplex")
    start(page)
    expect(page.locator("#duplex-status")).to_contain_text("Live", timeout=20_000)
    page.wait_for_function("omnivox.units.length >= 1", timeout=20_000)
    pause = page.get_by_role("button", name="Pause")
    pause.focus()
    page.keyboard.press("Enter")  # the controls work from the keyboard
    expect(page.locator("#duplex-status")).to_contain_text("Paused. Resume within 60 s")
    resume = page.get_by_role("button", name="Resume")
    expect(resume).to_have_attribute("aria-pressed", "true")
    wait_for(lambda: worker_state(dx) == "DUPLEX_PAUSED")
    assert [s["paused"] for s in httpx.get(dx.url + "/api/sessions").json()["sessions"]] == [True]
    resume.click()
    expect(page.locator("#duplex-status")).to_contain_text("Live again")
    expect(page.get_by_role("button", name="Pause")).to_have_attribute("aria-pressed", "false")
    wait_for(lambda: worker_state(dx) == "DUPLEX_ACTIVE")
    resumed_at = page.evaluate("omnivox.units.length")
    page.wait_for_function(f"omnivox.units.length > {resumed_at}", timeout=20_000)  # units go on
    expect(page.locator("#transcript")).to_contain_text("— paused —")
    expect(page.locator("#transcript")).to_contain_text("— resumed —")
    # nothing was sent while paused that the server had to refuse
    expect(page.get_by_role("alert")).to_be_hidden()
    stop(page)
    wait_idle(dx)


def test_queue_position_while_a_second_page_waits(dx, open_page, screenshot):
    first = open_page(dx.url + "/duplex")
    start(first)
    expect(first.locator("#duplex-status")).to_contain_text("Live", timeout=20_000)
    second = open_page(dx.url + "/duplex")
    start(second)
    expect(second.locator("#duplex-status")).to_contain_text("Waiting for a worker: position 1 of 1")
    expect(second.get_by_role("button", name="Pause")).to_be_disabled()
    screenshot(second, "duplex-queued")
    stop(first)
    expect(second.locator("#duplex-status")).to_contain_text("Live", timeout=20_000)
    second.wait_for_function("omnivox.units.length >= 1", timeout=20_000)
    stop(second)
    wait_idle(dx)


def test_omni_sends_camera_frames(dx, open_page, screenshot):
    """The page's socket is passed through to the real server, so the test sees what it sent."""
    sent: list[dict] = []

    def through(route) -> None:
        server = route.connect_to_server()

        def up(raw) -> None:
            sent.append(json.loads(raw))
            server.send(raw)

        route.on_message(up)
        server.on_message(lambda raw: route.send(raw))

    page = open_page(
        dx.url + "/omni", route=lambda p: p.route_web_socket(re.compile(r"/ws/duplex/"), through)
    )
    page.context.grant_permissions(["microphone", "camera"])
    start(page)
    expect(page.locator("#duplex-status")).to_contain_text("Live", timeout=20_000)
    page.wait_for_function("omnivox.units.length >= 3", timeout=30_000)  # results keep coming
    expect(page.locator("#frames-sent")).not_to_have_text("0")
    expect(page.locator("#vision-note")).to_contain_text("does not see them")  # the echo LLM is blind
    assert page.evaluate("document.getElementById('camera-preview').videoWidth") > 0
    screenshot(page, "omni")
    stop(page)
    wait_idle(dx)

    prepare = next(m for m in sent if m["type"] == "prepare")
    assert prepare["config"]["chunk_ms"] == 1000 and prepare["config"]["sample_rate"] == 16000
    chunks = [m for m in sent if m["type"] == "audio_chunk"]
    assert len(chunks) >= 3
    framed = [c for c in chunks if c.get("frame_base64_list")]
    assert framed and all(len(c["frame_base64_list"]) == 1 for c in framed)  # one frame per unit
    frame = framed[-1]["frame_base64_list"][0]
    assert image_format_b64(frame) == "jpeg"
    assert decode_image_b64(frame, 10_000_000).shape[:2] == (480, 640)  # the fake camera's picture
    # float32 mono at 16 kHz: a whole unit of samples per chunk
    assert all(len(base64.b64decode(c["audio_base64"])) == 16000 * 4 for c in chunks[:-1])
    assert all("format" not in c for c in chunks)


# ---- a scripted /ws/duplex in the browser


def tone(seconds: float, rate: int = 24000) -> str:
    """A 440 Hz tone as base64 PCM16."""
    t = np.arange(int(seconds * rate)) / rate
    return base64.b64encode((0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2").tobytes()).decode()


class ScriptedDuplex:
    """A stand-in for `/ws/duplex/{id}`: queue_done at once, prepared on prepare, and one listen
    result per audio_chunk unless ``on_chunk(server, route, msg)`` answers it; records what it got."""

    def __init__(self, on_chunk=None, on_pause=None, first=None) -> None:
        self.routes: list = []
        self.received: list[dict] = []
        self.units = 0
        self.on_chunk = on_chunk
        self.on_pause = on_pause
        self.first = first  # first(server, route, n) on connecting, instead of queue_done

    def install(self, page) -> None:
        page.route_web_socket(re.compile(r"/ws/duplex/"), self.connect)

    def connect(self, route) -> None:
        self.routes.append(route)
        n = len(self.routes)
        route.on_message(lambda raw: self.message(route, json.loads(raw)))
        if self.first:
            self.first(self, route, n)
        else:
            self.send(route, "queue_done", ticket_id=f"t{n}", worker_id="w1", waited_s=0.0)

    def message(self, route, msg: dict) -> None:
        self.received.append(msg)
        kind = msg["type"]
        if kind == "prepare":
            config = {"chunk_ms": 1000, **msg["config"]}
            self.send(
                route,
                "prepared",
                session_id="s",
                mode="audio",
                config=config,
                deferred_finalize=True,
                vision=False,
                warnings=[],
            )
        elif kind == "audio_chunk":
            if self.on_chunk and self.on_chunk(self, route, msg):
                return
            self.result(route, is_listen=True)
        elif kind == "pause":
            if self.on_pause:
                self.on_pause(self, route, msg)
            else:
                self.send(route, "paused", timeout_s=msg.get("timeout", 60))
        elif kind == "resume":
            self.send(route, "resumed")
        elif kind == "stop":
            self.send(route, "stopped", session_id="s", units=self.units)
            route.close(code=1000)

    def result(self, route, **fields) -> None:
        body = {
            "unit_index": self.units,
            "is_listen": True,
            "text": "",
            "end_of_turn": False,
            "current_time": float(self.units),
            "cost_prefill_ms": 1.0,
            "cost_generate_ms": 2.0,
            "cost_finalize_ms": 0.5,
            "wall_clock_ms": 12.0,
            "kv_cache_length": 0,
            "lagging": False,
            "merged_chunks": 1,
            **fields,
        }
        self.units += 1
        self.send(route, "result", **body)

    @staticmethod
    def send(route, type_: str, **fields) -> None:
        route.send(json.dumps({"type": type_, **fields}))


def test_model_yielding_drops_the_queued_reply_audio(dx, open_page, screenshot):
    def speak_at_once(server, route, msg) -> bool:
        if server.units:
            return False
        server.result(route, lagging=True, merged_chunks=2)
        for i in range(4):  # four seconds of reply, all queued in the player
            text = "Once upon a time" if i == 0 else (" there was a tone." if i == 1 else "")  # deltas
            server.result(route, is_listen=False, text=text, audio_data=tone(1.0), audio_sample_rate=24000)
        return True

    server = ScriptedDuplex(on_chunk=speak_at_once)
    page = open_page(dx.url + "/duplex", route=server.install)
    start(page)
    said = page.locator("#transcript .line.assistant")
    expect(said).to_have_text("Assistant:Once upon a time there was a tone.")
    page.wait_for_function("omnivox.player.stats.played > 2400 && omnivox.player.stats.buffered > 24000")
    timeline = page.locator("#timeline")
    expect(timeline.locator(".unit")).to_have_count(5)
    expect(timeline.locator(".unit.lagging")).to_have_count(1)
    expect(timeline.locator(".unit.lagging")).to_have_attribute(
        "title", "Unit 0: listened, 12 ms, lagging: 2 chunks merged"
    )
    expect(timeline.locator(".unit.speak")).to_have_count(4)
    expect(page.locator("#duplex-figures .stat", has_text="Lagging")).to_contain_text("1")
    # the model yields (the user talked over it): the page drops what is still queued at once
    server.result(server.routes[0], is_listen=True, end_of_turn=True)
    page.wait_for_function("omnivox.player.stats.clears === 1 && omnivox.player.stats.buffered === 0")
    expect(said).to_contain_text("(interrupted)")
    expect(timeline.locator(".unit.eot")).to_have_count(1)
    stats = page.evaluate("omnivox.player.stats")
    assert stats["dropped"] > 24000 and stats["played"] < stats["received"], stats
    # a reply that ends on its own plays out: nothing dropped
    server.result(server.routes[0], is_listen=False, text="The end.", audio_data=tone(0.3), end_of_turn=True)
    expect(said.nth(1)).to_contain_text("The end.")
    page.wait_for_function("omnivox.player.stats.buffered === 0 && omnivox.player.stats.playing === false")
    assert page.evaluate("omnivox.player.stats.clears") == 1
    expect(said.nth(1)).not_to_contain_text("interrupted")
    screenshot(page, "duplex-yielded")
    stop(page)
    assert server.received[-1]["type"] == "stop"


def test_settings_reach_the_server(dx, open_page):
    server = ScriptedDuplex()
    page = open_page(dx.url + "/duplex", route=server.install)
    page.locator("summary", has_text="Settings").click()
    page.get_by_label("System prompt").fill("Be brief.")
    page.get_by_label("Unit length (ms)").fill("500")
    page.get_by_label("Units that only listen at first").fill("1")
    page.get_by_label("Audio sent as").select_option("pcm16")
    start(page)
    page.wait_for_function("omnivox.units.length >= 3")
    stop(page)
    prepare = next(m for m in server.received if m["type"] == "prepare")
    assert prepare["system_prompt"] == "Be brief."
    assert prepare["config"] == {
        "sample_rate": 16000,
        "chunk_ms": 500,
        "force_listen_count": 1,
        "generate_audio": True,
    }
    chunks = [m for m in server.received if m["type"] == "audio_chunk"]
    assert all(c["format"] == "pcm16" for c in chunks)
    assert all(len(base64.b64decode(c["audio_base64"])) == 8000 * 2 for c in chunks[:-1])  # 500 ms
    assert not any("frame_base64_list" in c for c in chunks)  # no camera on /duplex


def test_a_pause_that_runs_out_is_explained(dx, open_page):
    def run_out(server, route, msg) -> None:
        server.send(route, "paused", timeout_s=1.0)
        server.send(route, "timeout", reason="pause_timeout")
        route.close(code=1000)

    server = ScriptedDuplex(on_pause=run_out)
    page = open_page(dx.url + "/duplex", route=server.install)
    start(page)
    page.wait_for_function("omnivox.units.length >= 1")
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("alert")).to_contain_text("The pause ran out")
    expect(page.get_by_role("button", name="Start session")).to_be_visible()
    expect(page.get_by_role("button", name="Pause")).to_be_disabled()
    pause = next(m for m in server.received if m["type"] == "pause")
    assert pause["timeout"] == 60


def test_lost_connection_is_explained_and_reconnects(dx, open_page, screenshot):
    def drop_first(server, route, msg) -> bool:
        if len(server.routes) == 1 and server.units == 2:
            route.close(code=1011, reason="worker lost")
            return True
        return False

    server = ScriptedDuplex(on_chunk=drop_first)
    page = open_page(dx.url + "/duplex", route=server.install)
    start(page)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The connection to the server was lost", timeout=15_000)
    expect(page.get_by_role("button", name="Start session")).to_be_visible()
    expect(page.locator("#transcript")).to_contain_text("connection lost")
    screenshot(page, "duplex-connection-lost")
    page.get_by_role("button", name="Reconnect").click()
    expect(alert).to_be_hidden()
    expect(page.locator("#duplex-status")).to_contain_text("Live")
    page.wait_for_function("omnivox.units.length >= 1")
    assert len(server.routes) == 2
    assert [m["type"] for m in server.received].count("prepare") == 2
    stop(page)


def test_the_queue_position_is_shown_and_followed(dx, open_page):
    def queued(server, route, n) -> None:
        server.send(route, "queued", ticket_id="t1", position=3, queue_length=4, estimated_wait_s=12.0)

    server = ScriptedDuplex(first=queued)
    page = open_page(dx.url + "/duplex", route=server.install)
    start(page)
    status = page.locator("#duplex-status")
    expect(status).to_contain_text("position 3 of 4, about 12.0 s")
    route = server.routes[0]
    ScriptedDuplex.send(route, "queue_update", ticket_id="t1", position=1, queue_length=2, estimated_wait_s=0)
    expect(status).to_contain_text("position 1 of 2, no estimate yet")
    # nothing goes to a worker before the session's turn
    assert not any(m["type"] in ("prepare", "audio_chunk") for m in server.received)
    ScriptedDuplex.send(route, "queue_done", ticket_id="t1", worker_id="w1", waited_s=3.0)
    expect(status).to_contain_text("Live")
    page.wait_for_function("omnivox.units.length >= 1")
    stop(page)


DENY_MICROPHONE = """
navigator.mediaDevices.getUserMedia = () =>
  Promise.reject(new DOMException("Permission denied", "NotAllowedError"));
"""

DENY_CAMERA = """
const real = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
navigator.mediaDevices.getUserMedia = (constraints) =>
  constraints.video
    ? Promise.reject(new DOMException("Permission denied", "NotAllowedError"))
    : real(constraints);
"""


@pytest.mark.parametrize(
    ("path", "script", "message"),
    [
        ("/duplex", DENY_MICROPHONE, "Microphone permission was denied"),
        ("/omni", DENY_MICROPHONE, "permission was denied"),
        ("/omni", DENY_CAMERA, "Camera permission was denied"),
    ],
)
def test_no_permission_is_explained(dx, open_page, path, script, message):
    page = open_page(dx.url + path, init_script=script)
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    start(page)
    expect(page.get_by_role("alert")).to_contain_text(message)
    expect(page.get_by_role("button", name="Start session")).to_be_visible()
    expect(page.locator("#duplex-status")).to_have_text("Press Start for a new session.")
    assert sockets == []  # nothing was sent anywhere
