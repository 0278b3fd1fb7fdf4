"""The home page, navigation between the pages, and every page on a phone-sized screen."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from cluster import cluster

pytestmark = pytest.mark.browser

PAGES = {
    "Home": "/",
    "Chat": "/turnbased",
    "Live voice": "/voice",
    "Duplex": "/duplex",
    "Omni": "/omni",
    "Admin": "/admin",
    "Recordings": "/sessions",
}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    with cluster(workers=1, log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def test_home_shows_what_the_server_offers_and_its_health(echo, open_page, screenshot):
    page = open_page(echo.url + "/")
    offers = page.locator("#offers")
    expect(offers).to_contain_text("Engines: echo")
    expect(offers).to_contain_text("turn-based streaming")
    expect(offers).to_contain_text("Not available here: realtime voice")
    expect(page.locator("#card-voice")).to_contain_text("Needs a worker with realtime voice")
    expect(page.locator("#card-duplex")).to_contain_text("Needs a worker with full duplex")
    expect(page.locator("#card-omni")).to_contain_text("Needs a worker with full duplex")
    health = page.locator("#health")
    expect(health.locator(".stat", has_text="Status")).to_contain_text("ok")
    expect(health.locator(".stat", has_text="Workers usable")).to_contain_text("1 / 1")
    expect(page.locator("#workers tr")).to_have_count(1)
    expect(page.locator("#workers")).to_contain_text("IDLE")
    screenshot(page, "home")


def test_navigation_reaches_every_page(echo, open_page):
    page = open_page(echo.url + "/")
    nav = page.get_by_role("navigation", name="Main")
    for name, path in [*list(PAGES.items())[1:], ("Home", "/")]:
        nav.get_by_role("link", name=name, exact=True).click()
        expect(page).to_have_url(echo.url + path)
        expect(nav.get_by_role("link", name=name, exact=True)).to_have_attribute("aria-current", "page")
        expect(page.get_by_role("heading", level=1)).to_be_visible()


def test_every_page_fits_a_phone_screen(echo, open_page, screenshot):
    for name, path in PAGES.items():
        page = open_page(echo.url + path, viewport=PHONE)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        page.wait_for_timeout(300)  # the first refresh of the page's figures
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px on a phone"
        screenshot(page, f"phone-{name.lower().replace(' ', '-')}")


def test_pages_and_modules_are_served_fresh(echo):
    """No build step means no content hashes in file names: browsers must revalidate every load."""
    for path in ["/", "/admin", "/static/pages/home.js", "/static/shared/player-worklet.js"]:
        resp = httpx.get(echo.url + path)
        assert resp.status_code == 200, path
        assert resp.headers["cache-control"] == "no-cache", path
    assert "javascript" in httpx.get(echo.url + "/static/shared/pcm.js").headers["content-type"]
