"""The recordings pages (/sessions, /sessions/{id}) in Chromium, against real processes.

A conversation on /voice (Chromium's fake microphone saying a sentence) is recorded; /sessions lists
it, and the viewer shows both speakers' turns on the time axis, the transcript and the reply's
latency, and plays the merged replay with a cursor that follows it; clicking a turn seeks there.
An omni session's viewer plays its video. Recordings need the admin key, which the pages ask for.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect

from cluster import cluster
from dxclient import DuplexClient
from omnivox.video.frames import encode_jpeg
from recordings import recording_env

pytestmark = pytest.mark.browser

ADMIN = {"Authorization": "Bearer adminkey"}
REMEMBER_KEY = "localStorage.setItem('omnivox.apiKey', 'adminkey')"


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    env = recording_env(tmp_path_factory.mktemp("data"), OMNIVOX_ADMIN_KEY="adminkey")
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("logs"), **env) as c:
        yield c


def recordings(c) -> list[dict]:
    return httpx.get(c.url + "/api/recordings", headers=ADMIN).json()["recordings"]


def wait_for_recording(c, kind: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [r for r in recordings(c) if r["kind"] == kind and r["status"] == "complete"]
        if done:
            return done[0]
        time.sleep(0.2)
    raise TimeoutError(f"no finished {kind} recording: {recordings(c)}")


def test_a_voice_conversation_is_listed_and_replayed_on_its_timeline(rec, open_page, screenshot):
    page = open_page(rec.url + "/voice")
    page.get_by_role("button", name="Start conversation").click()
    expect(page.locator("#transcript .line.assistant").first).to_contain_text("weather", timeout=30_000)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the reply is over (its figures come with its end)
        live = httpx.get(rec.url + "/api/sessions", headers=ADMIN).json()["sessions"]
        if live and live[0]["turns"] >= 1:
            break
        time.sleep(0.2)
    page.get_by_role("button", name="Stop conversation").click()
    item = wait_for_recording(rec, "realtime")

    # the list asks for the admin key, then shows the conversation
    listing = open_page(rec.url + "/sessions")
    expect(listing.get_by_role("alert")).to_contain_text("admin key")
    listing.get_by_label("Recordings need this gateway's admin key").fill("adminkey")
    listing.get_by_role("button", name="Use key").click()
    row = listing.locator(f'tr[data-recording="{item["session_id"]}"]')
    expect(row).to_contain_text("Live voice")
    expect(row).to_contain_text("client left")  # the page ended it
    screenshot(listing, "sessions")
    row.get_by_role("link").click()
    expect(listing).to_have_url(re.compile(rf"/sessions/{re.escape(item['session_id'])}$"))
    view = listing

    # both speakers on the timeline, the transcript and the reply's latency
    user_bar = view.locator(".rec-lane.user .rec-bar").first
    reply_bar = view.locator(".rec-lane.assistant .rec-bar").first
    expect(user_bar).to_have_attribute("aria-label", re.compile(r"You, .*weather.*paris", re.I))
    expect(reply_bar).to_have_attribute("aria-label", re.compile(r"Assistant, .*You said: .*weather", re.I))
    user_box, reply_box = user_bar.bounding_box(), reply_bar.bounding_box()
    assert user_box["x"] + user_box["width"] <= reply_box["x"] + 2  # the reply follows the question
    expect(view.locator("#transcript li.assistant")).to_contain_text("replied after")
    expect(view.locator("#latency tr")).to_have_count(1)
    expect(view.locator("#latency tr td").nth(2)).to_have_text(re.compile(r"\d+ ms"))
    expect(view.locator("#latency tr td").nth(3)).to_contain_text("voice to voice")
    # where the reply's time went: a waterfall of its stages, the last (its first audio) at the far end
    waterfall = view.locator("#latency tr .waterfall")
    for stage in (
        "noticed",
        "decided",
        "transcribed",
        "llm_first_token",
        "tts_first_audio",
        "first_audio_sent",
    ):
        expect(waterfall.locator(f'li[data-stage="{stage}"]')).to_contain_text(re.compile(r"\d+ ms"))
    ends = waterfall.locator(".wf-bar").evaluate_all(
        "bars => bars.map(b => parseFloat(b.style.left) + parseFloat(b.style.width))"
    )
    assert max(ends) == pytest.approx(100, abs=0.2) and min(ends) > 0

    # the merged replay plays, the cursor follows it, a click on a turn seeks there
    audio = view.locator("#replay-audio")
    expect(audio).to_be_visible()
    view.wait_for_function("document.getElementById('replay-audio').readyState >= 1", timeout=15_000)
    duration = view.evaluate("document.getElementById('replay-audio').duration")
    detail = httpx.get(f"{rec.url}/api/recordings/{item['session_id']}", headers=ADMIN).json()
    assert duration == pytest.approx(detail["timeline"]["duration_s"], abs=0.1)
    reply = next(t for t in detail["timeline"]["turns"] if t["role"] == "assistant")
    reply_bar.click()
    view.wait_for_function(
        f"Math.abs(document.getElementById('replay-audio').currentTime - {reply['start']}) < 0.5"
    )
    view.evaluate(
        "document.getElementById('replay-audio').muted = true; document.getElementById('replay-audio').play()"
    )
    cursor_x = view.evaluate("() => parseFloat(document.querySelector('.rec-cursor').style.left)")
    expected_x = 100 * reply["start"] / detail["timeline"]["duration_s"]
    assert cursor_x == pytest.approx(expected_x, abs=3)
    view.wait_for_function(
        f"parseFloat(document.querySelector('.rec-cursor').style.left) > {cursor_x + 1}", timeout=10_000
    )  # it moves with the replay
    expect(view.locator(".rec-lane.assistant .rec-bar.now")).to_have_count(1)
    expect(view.locator("#transcript li.assistant.now")).to_have_count(1)
    screenshot(view, "session-replay")
    phone = open_page(view.url, viewport={"width": 390, "height": 844}, init_script=REMEMBER_KEY)
    expect(phone.locator(".rec-lane.assistant .rec-bar")).to_have_count(1)
    assert phone.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    screenshot(phone, "phone-session-replay")

    # the admin page's sessions table links here
    page.get_by_role("button", name="Start conversation").click()
    admin = open_page(rec.url + "/admin", init_script=REMEMBER_KEY)
    link = admin.locator("#sessions a").first
    expect(link).to_have_attribute("href", re.compile(r"^/sessions/"))
    page.get_by_role("button", name="Stop conversation").click()


def test_an_omni_recording_plays_its_video(rec, open_page, screenshot):
    async def omni() -> None:
        async with DuplexClient(rec.ws, "omni_viewer", timeout=30, speed=4.0) as cl:
            await cl.until("queue_done")
            await cl.send("prepare")
            await cl.until("prepared")
            for i in range(3):
                frame = np.full((120, 160, 3), (60 * i, 120, 200 - 60 * i), np.uint8)
                jpeg = base64.b64encode(encode_jpeg(frame)).decode()
                await cl.chunk(np.zeros(16000, np.float32), frame_base64_list=[jpeg])
            await cl.send("stop")
            await cl.until("stopped")

    with ThreadPoolExecutor(1) as pool:  # (Playwright's sync API holds this thread's event loop)
        pool.submit(asyncio.run, omni()).result()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        resp = httpx.get(rec.url + "/api/recordings/omni_viewer", headers=ADMIN)
        if resp.status_code == 200 and resp.json()["meta"]["status"] == "complete":
            break
        time.sleep(0.2)
    view = open_page(rec.url + "/sessions/omni_viewer", init_script=REMEMBER_KEY)
    video = view.locator("#replay-video")
    expect(video).to_be_visible()
    expect(view.locator("#replay-audio")).to_be_hidden()
    view.wait_for_function("document.getElementById('replay-video').readyState >= 2", timeout=15_000)
    size = view.evaluate("(v => [v.videoWidth, v.videoHeight])(document.getElementById('replay-video'))")
    assert size == [160, 120]
    expect(view.locator("#summary")).to_contain_text("Omni (video)")
    screenshot(view, "session-omni")

    # filter and search on the list
    listing = open_page(rec.url + "/sessions", init_script=REMEMBER_KEY)
    listing.get_by_label("Kind").select_option("omni_duplex")
    expect(listing.locator("tr[data-recording]")).to_have_count(1)
    expect(listing.locator("tr[data-recording]")).to_contain_text("omni_viewer")
    listing.get_by_label("Kind").select_option("")
    listing.get_by_label("Transcripts contain").fill("paris")
    listing.get_by_role("button", name="Search").click()
    expect(listing.locator("tr[data-recording]")).to_have_count(1)
    expect(listing.locator("tr[data-recording]")).to_contain_text("Live voice")
    listing.get_by_label("Transcripts contain").fill("no such words anywhere")
    listing.get_by_role("button", name="Search").click()
    expect(listing.locator("#recordings")).to_contain_text("No recordings match.")

    # delete from the viewer
    view.on("dialog", lambda dialog: dialog.accept())
    view.locator("summary", has_text="Details").click()
    view.get_by_role("button", name="Delete this recording").click()
    expect(view).to_have_url(rec.url + "/sessions")
    assert httpx.get(rec.url + "/api/recordings/omni_viewer", headers=ADMIN).status_code == 404


def test_a_session_without_a_recording_says_so(rec, open_page):
    view = open_page(rec.url + "/sessions/never-recorded", init_script=REMEMBER_KEY)
    expect(view.get_by_role("alert")).to_contain_text("There is no recording of this session")
    expect(view.locator("#replay-panel")).to_be_hidden()
