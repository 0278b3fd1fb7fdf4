"""Pages on a gateway with keys: the admin page asks for its key; the chat page's socket carries it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from cluster import cluster

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    with cluster(workers=1, log_dir=tmp_path_factory.mktemp("logs"), OMNIVOX_API_KEY="page-key") as c:
        yield c


def test_the_admin_page_asks_for_the_key_then_shows_the_gateway(keyed, open_page, screenshot):
    page = open_page(keyed.url + "/admin", allow=(r"401",))
    expect(page.locator("#admin-error")).to_contain_text("admin key")
    form = page.locator("#key-form")
    expect(form).to_be_visible()
    page.get_by_label("This gateway needs its admin key").fill("page-key")
    form.get_by_role("button", name="Use key").click()
    expect(page.locator("#workers tr")).to_have_count(1)
    expect(form).to_be_hidden()
    expect(page.locator("#admin-error")).to_be_hidden()
    screenshot(page, "admin-keyed")

    # the key is kept in this browser: the chat page's WebSocket offers it (as a subprotocol)
    page.goto(keyed.url + "/turnbased")
    page.get_by_label("Message", exact=True).fill("hello with a key")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages .msg.assistant .text").last).to_have_text("(echo) hello with a key")


def test_without_the_key_a_chat_is_refused_and_says_why(keyed, open_page):
    page = open_page(keyed.url + "/turnbased", allow=(r"401", r"WebSocket"))
    page.get_by_label("Message", exact=True).fill("no key")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages")).to_contain_text("key")
