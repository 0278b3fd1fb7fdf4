"""Browser fixtures: Debian's Chromium driven by Playwright (sync API), a fake microphone that says a
sentence synthesized by hibari, pages that fail their test on any JavaScript error, and screenshots.

Screenshots go to ``$OMNIVOX_SCREENSHOT_DIR`` when it is set, else to pytest's temporary folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("OMNIVOX_CHROMIUM", "/usr/bin/chromium")
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
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set OMNIVOX_CHROMIUM)")
    from playwright.sync_api import sync_playwright

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
                "--use-fake-device-for-media-stream",
                # %noloop: each capture plays the sentence once, then silence
                f"--use-file-for-fake-audio-capture={speech_wav}%noloop",
            ],
        )
        yield browser
        browser.close()


class PageErrors:
    """Console errors and uncaught exceptions of one page."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def attach(self, page) -> None:
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


@pytest.fixture
def open_page(browser, request) -> Iterator[Callable[..., object]]:
    """open_page(url, viewport=None) -> a Playwright page; at the end no page may have logged an error."""
    contexts = []
    errors = PageErrors()

    def open_(url: str, viewport: dict | None = None):
        context = browser.new_context(viewport=viewport or {"width": 1100, "height": 900})
        context.grant_permissions(["microphone"])
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        errors.attach(page)
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
