"""The chat page (/turnbased) in Chromium against real gateway and worker processes."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib

import httpx
import pytest
from playwright.sync_api import expect

from cluster import ECHO_VOICE, cluster

pytestmark = pytest.mark.browser

LONG = " ".join(f"word{i}" for i in range(60))  # 12 s of echo at 0.2 s a word


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    """One slow echo worker: each word of a reply takes 0.2 s, so a long reply can be stopped."""
    with cluster(workers=1, log_dir=tmp_path_factory.mktemp("logs"), OMNIVOX_ECHO_DELAY_S="0.2") as c:
        yield c


def send(page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_role("button", name="Send").click()


def frames_sent(page) -> list[dict]:
    """Every JSON message the page sends on its WebSockets from now on."""
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: frames.append(json.loads(payload))))
    return frames


def last_reply(page):
    return page.locator("#messages .msg.assistant").last


def test_typed_message_gets_a_streamed_reply(echo, open_page, screenshot):
    page = open_page(echo.url + "/turnbased")
    sent = frames_sent(page)
    expect(page.locator("#capabilities")).to_contain_text("echo")
    send(page, "hello from the browser")
    reply = last_reply(page)
    expect(reply.locator(".text")).to_have_text("(echo) hello from the browser")
    expect(reply).to_have_attribute("data-stopped", "false")
    expect(reply.locator(".figures")).to_contain_text("first token")
    assert int(reply.get_attribute("data-ttft-page-ms")) >= 0
    # the second turn carries the whole conversation; the worker holds the first, so it is a cache hit
    send(page, "and again")
    reply = last_reply(page)
    expect(reply.locator(".text")).to_have_text("(echo) and again")
    expect(reply.locator(".figures")).to_contain_text("cache hit")
    assert int(reply.get_attribute("data-cached-tokens")) > 0
    prefills = [f for f in sent if f["type"] == "prefill"]
    assert [len(p["messages"]) for p in prefills] == [1, 3]  # each turn sends the whole conversation
    assert [f["type"] for f in sent] == ["prefill", "generate"] * 2
    history = page.evaluate("omnivox.chat.messages")
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"] == "(echo) hello from the browser"
    screenshot(page, "turnbased")


def test_stop_halts_a_running_generation(echo, open_page):
    page = open_page(echo.url + "/turnbased")
    send(page, LONG)
    reply = last_reply(page)
    expect(reply.locator(".text")).to_contain_text("word1")
    page.get_by_role("button", name="Stop").click()
    expect(reply).to_have_attribute("data-stopped", "true")
    expect(reply.locator(".figures")).to_contain_text("stopped")
    words = reply.locator(".text").inner_text().split()
    assert 2 <= len(words) < 30, words  # stopped early: the whole echo is 61 words
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    # the stopped reply is part of the conversation, exactly as the worker cached it
    assert page.evaluate("omnivox.chat.messages")[-1]["content"] == " ".join(words)


def test_a_second_page_shows_its_queue_position(echo, open_page, screenshot):
    first = open_page(echo.url + "/turnbased")
    send(first, LONG)
    expect(last_reply(first).locator(".text")).to_contain_text("word0")  # holds the only worker
    second = open_page(echo.url + "/turnbased")
    send(second, "my turn please")
    status = second.locator("#queue-status")
    expect(status).to_contain_text(re.compile(r"position 1 of 1"))
    expect(last_reply(second).locator(".figures")).to_contain_text("queued (#1)")
    screenshot(second, "turnbased-queued")
    first.get_by_role("button", name="Stop").click()  # frees the worker: the second page is served
    expect(last_reply(second).locator(".text")).to_have_text("(echo) my turn please", timeout=20_000)
    expect(last_reply(second).locator(".figures")).to_contain_text("waited")
    expect(status).to_have_text("")


def test_stop_while_queued_leaves_the_queue(echo, open_page):
    first = open_page(echo.url + "/turnbased")
    send(first, LONG)
    expect(last_reply(first).locator(".text")).to_contain_text("word0")
    second = open_page(echo.url + "/turnbased")
    send(second, "never mind")
    expect(second.locator("#queue-status")).to_contain_text("position 1")
    second.get_by_role("button", name="Stop").click()
    expect(second.get_by_role("alert")).to_contain_text("left the queue")
    assert httpx.get(echo.url + "/api/queue").json()["queue_length"] == 0
    first.get_by_role("button", name="Stop").click()
    expect(last_reply(first)).to_have_attribute("data-stopped", "true")


@pytest.fixture(scope="module")
def cascade(tmp_path_factory):
    with cluster(workers=1, engine="cascade", log_dir=tmp_path_factory.mktemp("logs"), **ECHO_VOICE) as c:
        yield c


def test_spoken_message_is_transcribed_and_answered(cascade, open_page, screenshot):
    page = open_page(cascade.url + "/turnbased")
    expect(page.get_by_label("Voice", exact=True)).to_have_value("heart")  # from GET /v1/voices
    sent = frames_sent(page)
    talk = page.get_by_role("button", name="Hold to talk")
    talk.hover()
    page.mouse.down()
    expect(page.locator("#queue-status")).to_contain_text("Listening")
    page.wait_for_timeout(3800)  # the fake microphone says the sentence within 3.2 s
    page.mouse.up()
    user = page.locator("#messages .msg.user").last
    expect(user).to_contain_text("Voice message")
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-stopped", "false", timeout=30_000)
    said = reply.locator(".text").inner_text().lower()
    assert "weather" in said and "paris" in said, said
    expect(user.locator(".transcript")).to_contain_text("weather")
    audio = next(f for f in sent if f["type"] == "prefill")["messages"][0]["content"][0]
    assert (audio["type"], audio["format"], audio["sample_rate"]) == ("audio", "pcm16", 16000)
    assert 3.0 < len(base64.b64decode(audio["data"])) / 2 / 16000 < 5.0  # about as long as the press
    generate = next(f for f in sent if f["type"] == "generate")
    assert generate["generate_audio"] is True and generate["voice"] == "heart"
    # half a second of the spoken reply went to the speakers, and it was not silence
    page.wait_for_function(
        "omnivox.player.stats.played > 12000 && omnivox.player.stats.peak > 0.01", timeout=20_000
    )
    screenshot(page, "turnbased-voice")


def png(width: int = 4, height: int = 4) -> bytes:
    """A small red RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def test_image_and_keyboard_message(echo, open_page, tmp_path):
    image = tmp_path / "dot.png"
    image.write_bytes(png())
    page = open_page(echo.url + "/turnbased")
    page.locator("#image-input").set_input_files(str(image))
    expect(page.get_by_alt_text("The image that will be sent with the next message")).to_be_visible()
    box = page.get_by_label("Message", exact=True)
    box.fill("what is in this picture")
    box.press("Enter")  # Enter sends; Shift+Enter would start a new line
    expect(last_reply(page).locator(".text")).to_have_text("(echo) what is in this picture")
    expect(page.locator("#messages .msg.user img")).to_be_visible()
    expect(page.locator("#attachment")).to_be_hidden()
    sent = page.evaluate("omnivox.chat.messages[0].content")
    assert [p["type"] for p in sent] == ["image", "text"]
    assert base64.b64decode(sent[0]["data"]) == png()  # a small PNG goes as it is
