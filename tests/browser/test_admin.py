"""The admin page: workers, a queued ticket, sessions and metrics, and cancelling the ticket."""

from __future__ import annotations

import json

import httpx
import pytest
from playwright.sync_api import expect
from websockets.sync.client import connect

from cluster import cluster

pytestmark = pytest.mark.browser

USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    with cluster(workers=1, log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def until(ws, *types: str) -> dict:
    while True:
        msg = json.loads(ws.recv(timeout=15))
        if msg["type"] in types:
            return msg


def stat(page, label: str):
    return page.locator("#metrics .stat", has_text=label).locator(".value")


def test_admin_shows_workers_and_a_queued_ticket_and_cancels_it(echo, open_page, screenshot):
    with (
        connect(f"{echo.ws}/ws/streaming/holder") as holder,
        connect(f"{echo.ws}/ws/streaming/waiter") as waiter,
    ):
        holder.send(json.dumps({"type": "prefill", "messages": USER}))
        assert until(holder, "prefill_done", "error")["type"] == "prefill_done"  # holds the only worker
        waiter.send(json.dumps({"type": "prefill", "messages": USER}))
        ticket = until(waiter, "queued")["ticket_id"]

        page = open_page(echo.url + "/admin")
        workers = page.locator("#workers")
        expect(workers.locator("tr")).to_have_count(1)
        expect(workers).to_contain_text("BUSY_STREAMING")
        expect(workers).to_contain_text("echo")
        expect(workers).to_contain_text("turn-based streaming")
        row = page.locator(f'#queue tr[data-ticket="{ticket}"]')
        expect(row).to_contain_text(ticket)
        expect(row.locator("td").first).to_have_text("1")  # position
        sessions = page.locator("#sessions")
        expect(sessions.locator("tr", has_text="holder")).to_contain_text("active")
        expect(sessions.locator("tr", has_text="waiter")).to_contain_text("queued")
        expect(stat(page, "Queue length")).to_have_text("1")
        expect(stat(page, "Active sessions")).to_have_text("2")
        screenshot(page, "admin")

        row.get_by_role("button", name=f"Cancel ticket {ticket}").click()
        expect(row).to_have_count(0)
        expect(page.locator("#queue")).to_contain_text("Nobody is waiting")
        expect(page.locator("#queue-status")).to_contain_text("Cancelled ticket")
        assert until(waiter, "error")["code"] == "ticket_cancelled"
        assert httpx.get(echo.url + "/api/queue").json()["queue_length"] == 0
        expect(stat(page, "Queue length")).to_have_text("0")
        expect(stat(page, "Errors")).to_have_text("1")  # the ticket_cancelled its client was sent

        holder.send(json.dumps({"type": "generate"}))
        until(holder, "done")
    expect(workers).to_contain_text("IDLE")
    expect(sessions).to_contain_text("No sessions connected")


def test_admin_shows_the_pipeline_stages_and_session_slots(echo, open_page):
    page = open_page(echo.url + "/admin")
    expect(page.locator("#stages-section")).to_be_hidden()  # no pipeline reports to this gateway
    report = {
        "pipeline": "cascade",
        "address": "tcp://127.0.0.1:5555",
        "epoch": "e1",
        "session_slots": 8,
        "clients": 3,
        "stages": [
            {
                "name": "asr",
                "scheduler": "streaming",
                "model": "whisper",
                "alive": True,
                "address": "tcp://127.0.0.1:6001",
                "load": {"slots_used": 3, "slots_total": 8, "queue": 0, "decode_calls": 4, "decode_items": 6},
            },
            {"name": "llm", "scheduler": "parallel", "model": "chat", "alive": False, "lost": 2},
        ],
    }
    httpx.post(echo.url + "/api/pipeline", json=report).raise_for_status()
    expect(page.locator("#stages-section")).to_be_visible()
    expect(page.locator("#stages-summary")).to_contain_text("cascade: 0 of 8 session slots taken, 3 clients")
    asr = page.locator('#stages tr[data-stage="asr"]')
    expect(asr).to_contain_text("alive")
    expect(asr).to_contain_text("whisper (streaming)")
    expect(asr.locator("td").nth(3)).to_have_text("3 / 8")
    expect(asr.locator("td").nth(5)).to_have_text("4, mean 1.50")  # batched decodes, transcripts each
    llm = page.locator('#stages tr[data-stage="llm"]')
    expect(llm).to_contain_text("down")
    expect(llm.locator("td").nth(6)).to_have_text("2")
