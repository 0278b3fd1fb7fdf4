"""A WebRTC call on one gateway steered from another: two gateways on one real redis-server, one
cascade worker (echo LLM, PocketSphinx) registered with both, aiortc as the caller on gateway A.

A sideband WebSocket for the call that lands on gateway B (``/v1/realtime?call_id=``) is relayed
to A, which holds the call: it hears the call's events and its commands steer the call; a hang-up
sent to B ends the call on A; only the opener's key or the client key may do either there too.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
import websockets

from cluster import ECHO_VOICE
from omnivox.bench.webrtc_client import WebRtcCall, loopback_only
from omnivox.testing.gateways import gateway_cluster
from scaleout_checks import ENV

AUTH = {"Authorization": "Bearer secret"}


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    loopback_only()
    env = {
        **ENV,
        "OMNIVOX_API_KEY": "secret",
        "OMNIVOX_WEBRTC_CONNECT_TIMEOUT_S": "5",
        "OMNIVOX_WEBRTC_HOST_ADDRESSES": '["127.0.0.1"]',
        **ECHO_VOICE,
    }
    with gateway_cluster(gateways=2, workers=0, log_dir=Path(tmp_path_factory.mktemp("calls")), **env) as c:
        c.add_worker(engine="cascade")
        c.wait_idle(1, timeout=120)
        yield c


async def next_of(side, kind: str, timeout: float = 20) -> dict:
    while True:
        event = json.loads(await asyncio.wait_for(side.recv(), timeout))
        assert event["type"] != "error", event
        if event["type"] == kind:
            return event


async def test_a_sideband_on_the_other_gateway_hears_and_steers_the_call(two_gateways):
    c = two_gateways
    a, b = c.gateways
    call = await WebRtcCall.open(a.url, "secret", session={"instructions": "Be brief."})
    try:
        await call.wait_for("session.updated")
        async with websockets.connect(
            f"{b.ws}/v1/realtime?call_id={call.call_id}", additional_headers=AUTH
        ) as side:
            await side.send(json.dumps({"type": "session.update", "session": {"instructions": "From B."}}))
            updated = await next_of(side, "session.updated")
            assert updated["session"]["instructions"] == "From B."
            await side.send(
                json.dumps({"type": "response.create", "response": {"output_modalities": ["text"]}})
            )
            done = await next_of(side, "response.done")
        on_call = await call.wait_for("response.done")  # the same response, on the call's own channel
        assert on_call["response"]["id"] == done["response"]["id"]
        assert call.of("session.updated")[-1]["session"]["instructions"] == "From B."
    finally:
        await call.close()


async def test_a_stranger_s_key_on_the_other_gateway_neither_hears_nor_hangs_up(two_gateways):
    c = two_gateways
    a, b = c.gateways
    mint = {"expires_after": {"anchor": "created_at", "seconds": 60}}
    opener = httpx.post(a.url + "/v1/realtime/client_secrets", json=mint, headers=AUTH).json()["value"]
    stranger = httpx.post(b.url + "/v1/realtime/client_secrets", json=mint, headers=AUTH).json()["value"]
    call = await WebRtcCall.open(a.url, opener)
    try:
        await call.wait_for("session.updated")
        bearer = {"Authorization": f"Bearer {stranger}"}
        async with websockets.connect(
            f"{b.ws}/v1/realtime?call_id={call.call_id}", additional_headers=bearer
        ) as spy:
            refused = json.loads(await asyncio.wait_for(spy.recv(), 10))
            await asyncio.wait_for(spy.wait_closed(), 10)
        assert refused["type"] == "error" and refused["error"]["code"] == "unauthorized"
        hangup = f"{b.url}/v1/realtime/calls/{call.call_id}/hangup"
        assert httpx.post(hangup, headers=bearer).status_code == 401
        assert c.wait(a, lambda h: h["workers_idle"] == 0, 10)  # the call holds the worker still
        # the opener's key hangs up through B: the call on A ends, the worker comes back
        assert httpx.post(hangup, headers={"Authorization": f"Bearer {opener}"}).status_code == 200
        c.wait(a, lambda h: h["workers_idle"] == 1, 20)
    finally:
        await call.close()
