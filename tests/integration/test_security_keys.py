"""Keys and origins, through real gateway and worker processes: who may do what, and what leaks.

Each test is one finding of the security audit (issue 11): it failed on the code before the fix.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from cluster import cluster

KEYS = {"OMNIVOX_CLIENT_KEY": "client-k", "OMNIVOX_ADMIN_KEY": "admin-k", "OMNIVOX_WORKER_KEY": "worker-k"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def first_message(url: str, **connect) -> tuple[dict, int | None]:
    """The first message of a session and how the connection ended (None: still open)."""
    async with websockets.connect(url, open_timeout=10, **connect) as ws:
        msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
        try:
            await asyncio.wait_for(ws.wait_closed(), 2)
        except TimeoutError:
            return msg, None
        return msg, ws.close_code


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("keys")
    with cluster(workers=1, engine="echo", log_dir=logs, OMNIVOX_LOG_LEVEL="INFO", **KEYS) as c:
        yield c


async def test_every_websocket_needs_the_client_key(keyed):
    for path in ("/ws/streaming/s1", "/ws/duplex/s1", "/v1/realtime"):
        msg, code = await first_message(keyed.ws + path)
        assert code == 1008, path
        assert "unauthorized" in json.dumps(msg), msg
        # the admin or worker key is not the client key
        msg, code = await first_message(keyed.ws + path, additional_headers=bearer("admin-k"))
        assert code == 1008, path
    async with websockets.connect(keyed.ws + "/ws/streaming/s2", additional_headers=bearer("client-k")) as ws:
        await ws.send(json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "hi"}]}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] in ("queue_done", "prefill_done")
    # browsers offer the key as a subprotocol, and the handshake answers with it
    proto = "openai-insecure-api-key.client-k"
    async with websockets.connect(keyed.ws + "/ws/streaming/s3", subprotocols=[proto]) as ws:
        assert ws.subprotocol == proto
        await ws.send(json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "hi"}]}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "error"


async def test_a_key_in_the_query_string_is_refused_and_never_logged(keyed):
    _, code = await first_message(keyed.ws + "/ws/streaming/s4?api_key=client-k")
    assert code == 1008
    assert httpx.get(keyed.url + "/api/workers?api_key=admin-k").status_code == 401
    # the gateway writes each request's line a moment after answering it: wait (10 s at most) until
    # both requests are in the log, so that what follows reads them
    logged = ("/ws/streaming/s4?api_key=", "/api/workers?api_key=")
    deadline = time.monotonic() + 10
    while True:
        log = (keyed.log_dir / "gateway.log").read_text()
        if all(request in log for request in logged) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert "api_key=***" in log  # the requests were logged, their keys blanked
    assert "client-k" not in log and "admin-k" not in log


def test_the_admin_api_needs_the_admin_key(keyed):
    for method, path in (
        ("GET", "/api/workers"),
        ("GET", "/api/sessions"),
        ("GET", "/api/stages"),
        ("GET", "/api/queue"),
        ("GET", "/api/queue/t_1"),
        ("DELETE", "/api/queue/t_1"),
    ):
        for headers in ({}, bearer("client-k"), bearer("worker-k"), bearer("admin-kX")):
            resp = httpx.request(method, keyed.url + path, headers=headers)
            assert resp.status_code == 401, (method, path, headers)
            assert resp.json()["detail"]["code"] == "unauthorized"
        ok = httpx.request(method, keyed.url + path, headers=bearer("admin-k"))
        assert ok.status_code in (200, 404), (method, path)  # no such ticket: but allowed to ask
    assert httpx.get(keyed.url + "/health").status_code == 200  # status only: open


def test_with_keys_metrics_and_the_api_description_need_the_admin_key(keyed):
    """Issue 25, finding 12: /metrics, /docs and /openapi.json were open on a keyed gateway."""
    for path in ("/metrics", "/openapi.json"):
        for headers in ({}, bearer("client-k"), bearer("worker-k")):
            assert httpx.get(keyed.url + path, headers=headers).status_code == 401, (path, headers)
        assert httpx.get(keyed.url + path, headers=bearer("admin-k")).status_code == 200, path
    assert "omnivox_sessions_total" in httpx.get(keyed.url + "/metrics", headers=bearer("admin-k")).text
    schema = httpx.get(keyed.url + "/openapi.json", headers=bearer("admin-k")).json()
    assert "/api/recordings" in schema["paths"]
    for page in ("/docs", "/redoc"):  # a page cannot send the key to fetch the schema: off
        assert httpx.get(keyed.url + page).status_code == 404, page
    assert httpx.get(keyed.url + "/health").status_code == 200


def test_what_stays_open_with_keys_is_said_and_can_be_opened_on_purpose():
    opened = {"OMNIVOX_METRICS_NEED_ADMIN": "false", "OMNIVOX_PUBLIC_API_DOCS": "true"}
    with cluster(workers=0, **KEYS, **opened) as c:
        for path in ("/metrics", "/openapi.json", "/docs", "/v1/voices", "/health"):
            assert httpx.get(c.url + path).status_code == 200, path


def test_registration_needs_the_worker_key(keyed):
    body = {"url": "http://127.0.0.1:9"}
    for headers in ({}, bearer("client-k"), bearer("admin-k")):
        assert httpx.post(keyed.url + "/api/workers/register", json=body, headers=headers).status_code == 401
    workers = httpx.get(keyed.url + "/api/workers", headers=bearer("admin-k")).json()["workers"]
    assert [w["url"] for w in workers] == [keyed.worker_urls[0]]  # the real one, registered with its key
    # a pipeline coordinator reports its stages (and session slots) with the worker key too
    report = {"pipeline": "p", "address": "tcp://127.0.0.1:9", "epoch": "e"}
    for headers in ({}, bearer("client-k"), bearer("admin-k")):
        assert httpx.post(keyed.url + "/api/pipeline", json=report, headers=headers).status_code == 401
    assert httpx.get(keyed.url + "/health").json().get("pipeline") is None
    assert httpx.post(keyed.url + "/api/pipeline", json=report, headers=bearer("worker-k")).status_code == 200
    assert httpx.get(keyed.url + "/api/stages", headers=bearer("admin-k")).json()["pipeline"] == "p"


async def test_workers_take_sessions_and_health_checks_from_the_key_holder_only(keyed):
    worker = keyed.worker_urls[0]
    assert httpx.get(worker + "/health").status_code == 401
    assert httpx.get(worker + "/health", headers=bearer("worker-k")).status_code == 200
    ws_url = worker.replace("http://", "ws://") + "/ws/streaming/direct"
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(ws_url, additional_headers=bearer("client-k")):
            pass
    assert refused.value.response.status_code == 403


async def test_cross_site_pages_cannot_open_sessions_or_post_forms(tmp_path):
    origins = '["http://app.example"]'
    with cluster(workers=1, engine="echo", OMNIVOX_ALLOWED_ORIGINS=origins) as c:
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(c.ws + "/ws/streaming/x", origin="http://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        for origin in (c.url, "http://app.example"):  # its own pages, and an allowed origin
            async with websockets.connect(c.ws + "/ws/streaming/x", origin=origin) as ws:
                await ws.send(
                    json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "hi"}]})
                )
                assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "error"
        form = {"file": ("a.wav", b"RIFF....WAVE", "audio/wav")}
        evil = httpx.post(
            c.url + "/api/assets/ref_audio", files=form, headers={"Origin": "http://evil.example"}
        )
        assert evil.status_code == 403 and evil.json()["detail"]["code"] == "origin_not_allowed"
        delete = httpx.delete(c.url + "/api/queue/t_1", headers={"Origin": "http://evil.example"})
        assert delete.status_code == 403
        # no Origin (an SDK, curl): not a browser page, not refused for it
        assert httpx.post(c.url + "/api/assets/ref_audio", files=form).status_code == 400  # bad WAV
        # CORS: an allowed origin may read the API from its pages; others get no CORS headers
        allowed_read = httpx.get(c.url + "/api/queue", headers={"Origin": "http://app.example"})
        assert allowed_read.headers.get("access-control-allow-origin") == "http://app.example"
        other = httpx.get(c.url + "/api/queue", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
