"""Browser fixtures: Debian's Chromium driven by Playwright (sync API), a fake microphone that says a
sentence synthesized by hibari, pages that fail their test on any JavaScript error, and screenshots.

Screenshots go to ``$OMNIVOX_SCREENSHOT_DIR`` when it is set, else to pytest's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("OMNIVOX_CHROMIUM", "/usr/bin/chromium")
EXPECT_TIMEOUT_MS = 10_000  # generous: the machines running the suite may be busy
SPOKEN = "what is the weather like in paris today"
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory) -> Path:
    """hibari saying SPOKEN: half a second of silence first, two after (so server VAD ends the turn).

    16-bit mono PCM at 24 kHz, which Chromium's fake capture device reads and resamples itself.
    """
    from omnivox.audio.wav import write_wav_file
    from omnivox.voice.tts.hibari import HibariTts

    speech = np.concatenate([c.audio for c in HibariTts(seed=0).synthesize(SPOKEN)])
    rate = 24000
    audio = np.concatenate([np.zeros(rate // 2, np.float32), speech, np.zeros(2 * rate, np.float32)])
    path = tmp_path_factory.mktemp("audio") / "speech.wav"
    write_wav_file(path, audio, rate)
    return path


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    configured = os.environ.get("OMNIVOX_SCREENSHOT_DIR")
    path = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser(speech_wav):
    if not shutil.which(CHROMIUM):  # `make test` installs it; a missing browser is a failure, not a skip
        pytest.fail(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set OMNIVOX_CHROMIUM)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--use-fake-ui-for-media-stream",
                # WebRTC calls to the gateway stay on 127.0.0.1 (it offers only that: see the clusters)
                "--allow-loopback-in-peer-connection",
                "--use-fake-device-for-media-stream",
                # %noloop: each capture plays the sentence once, then silence
                f"--use-file-for-fake-audio-capture={speech_wav}%noloop",
            ],
        )
        yield browser
        browser.close()


ASSETS = ("document", "script", "stylesheet", "image", "font")


class PageErrors:
    """JavaScript errors (console errors, uncaught exceptions) and broken assets of the pages.

    Chromium also logs every HTTP error response as a console error; for API calls a page handles
    those itself (a 404 from an endpoint this server lacks), so they are checked as responses:
    a page, script, stylesheet or image that fails to load is an error, an API answer is not.
    """

    def __init__(self) -> None:
        self.errors: list[str] = []

    def attach(self, page, allow: tuple[str, ...]) -> None:
        def console(message) -> None:
            text = message.text
            if message.type != "error" or text.startswith("Failed to load resource"):
                return
            if not any(re.search(pattern, text) for pattern in allow):
                self.errors.append(f"console: {text}")

        def response(resp) -> None:
            if resp.status >= 400 and resp.request.resource_type in ASSETS:
                self.errors.append(f"HTTP {resp.status}: {resp.url}")

        page.on("console", console)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("response", response)
        page.on(
            "requestfailed",
            lambda r: r.resource_type in ASSETS and self.errors.append(f"failed: {r.url} {r.failure}"),
        )


@pytest.fixture
def open_page(browser, request) -> Iterator[Callable[..., object]]:
    """open_page(url, viewport=None, allow=(), init_script=None, route=None) -> a Playwright page.

    At the end of the test no page may have logged a JavaScript error, except console errors that
    match a pattern in ``allow``. ``init_script`` runs before the page's own scripts; ``route(page)``
    installs request or WebSocket routes before the page loads.
    """
    contexts = []
    errors = PageErrors()

    def open_(
        url: str,
        viewport: dict | None = None,
        allow: tuple[str, ...] = (),
        init_script: str | None = None,
        route: Callable[[object], None] | None = None,
    ):
        context = browser.new_context(viewport=viewport or {"width": 1100, "height": 900})
        context.grant_permissions(["microphone"])
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        errors.attach(page, allow)
        if init_script:
            page.add_init_script(init_script)
        if route:
            route(page)
        page.goto(url)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert errors.errors == [], f"JavaScript errors in {request.node.name}: {errors.errors}"


@pytest.fixture
def screenshot(screenshot_dir) -> Callable[[object, str], Path]:
    def take(page, name: str) -> Path:
        path = screenshot_dir / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
