"""The WebRTC and key routes on a real gateway app, in process: what they refuse, and when.

Findings of the third security audit (issue 25): concurrent offers past ``webrtc_max_calls`` were
all answered (the limit was checked before a call was held); one client could take every key slot,
with sessions of any size.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection

from omnivox.core.config import Settings
from omnivox.gateway.app import create_gateway_app

AUTH = {"Authorization": "Bearer k"}


async def _offer() -> str:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.addTransceiver("audio")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


async def test_concurrent_offers_past_the_call_limit_are_refused_not_all_answered() -> None:
    app = create_gateway_app(Settings(api_key="k", webrtc_max_calls=4, webrtc_host_addresses=["127.0.0.1"]))
    offers = [await _offer() for _ in range(12)]
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as http:
        headers = {**AUTH, "Content-Type": "application/sdp"}
        answers = await asyncio.gather(
            *(http.post("/v1/realtime/calls", content=sdp, headers=headers) for sdp in offers)
        )
        codes = sorted(r.status_code for r in answers)
        assert codes == [201] * 4 + [429] * 8, codes
        refused = next(r for r in answers if r.status_code == 429).json()
        assert refused["error"]["code"] == "too_many_sessions"
        await app.state.ctx.calls.close()


async def test_one_client_cannot_take_every_key_and_a_key_holds_a_bounded_session() -> None:
    app = create_gateway_app(
        Settings(
            api_key="k", client_secrets_max=10, client_secrets_per_client=3, client_secret_session_bytes=2048
        )
    )
    here = httpx.ASGITransport(app=app, client=("10.0.0.1", 5000))
    there = httpx.ASGITransport(app=app, client=("10.0.0.2", 5000))
    async with (
        httpx.AsyncClient(transport=here, base_url="http://gw") as one,
        httpx.AsyncClient(transport=there, base_url="http://gw") as other,
    ):
        mint = {"session": {"instructions": "be brief"}}
        got = [await one.post("/v1/realtime/client_secrets", json=mint, headers=AUTH) for _ in range(4)]
        assert [r.status_code for r in got] == [200, 200, 200, 429]
        assert got[-1].json()["error"]["code"] == "too_many_sessions"
        assert (await other.post("/v1/realtime/client_secrets", json=mint, headers=AUTH)).status_code == 200
        huge = {"session": {"instructions": "x" * 4096}}
        too_big = await other.post("/v1/realtime/client_secrets", json=huge, headers=AUTH)
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "message_too_large"
        assert too_big.json()["error"]["param"] == "session"


def _client(settings: Settings) -> httpx.AsyncClient:
    app = create_gateway_app(settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


async def test_a_minted_key_lives_as_asked_and_by_default_ten_minutes() -> None:
    import time

    async with _client(Settings(api_key="k")) as http:
        before = int(time.time())
        plain = (await http.post("/v1/realtime/client_secrets", headers=AUTH)).json()
        assert plain["value"].startswith("ek_") and before + 600 <= plain["expires_at"] < before + 660
        asked = {"expires_after": {"anchor": "created_at", "seconds": 10}}
        short = (await http.post("/v1/realtime/client_secrets", json=asked, headers=AUTH)).json()
        assert short["expires_at"] <= int(time.time()) + 10


async def test_minting_needs_the_client_key_not_a_minted_one() -> None:
    async with _client(Settings(api_key="k")) as http:
        assert (await http.post("/v1/realtime/client_secrets")).status_code == 401
        minted = (await http.post("/v1/realtime/client_secrets", headers=AUTH)).json()["value"]
        again = await http.post("/v1/realtime/client_secrets", headers={"Authorization": f"Bearer {minted}"})
        assert again.status_code == 401


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"expires_after": {"anchor": "now", "seconds": 60}}, "expires_after.anchor"),
        ({"expires_after": "soon"}, "expires_after.anchor"),
        ({"expires_after": {"seconds": 9}}, "expires_after.seconds"),
        ({"expires_after": {"seconds": 7201}}, "expires_after.seconds"),
        ({"expires_after": {"seconds": 60.5}}, "expires_after.seconds"),
        ({"expires_after": {"seconds": True}}, "expires_after.seconds"),  # a bool is no number here
        ({"expires_after": {"seconds": "60"}}, "expires_after.seconds"),
        ({"session": "be brief"}, "session"),
        ({"session": []}, "session"),
    ],
)
async def test_a_bad_mint_request_names_its_field(body, param) -> None:
    async with _client(Settings(api_key="k")) as http:
        refused = await http.post("/v1/realtime/client_secrets", json=body, headers=AUTH)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "invalid_message" and error["param"] == param


@pytest.mark.parametrize(
    ("raw", "message"), [(b"[1, 2]", "must be a JSON object"), (b"{nope", "is not JSON")]
)
async def test_a_mint_body_that_is_no_json_object_is_refused(raw, message) -> None:
    async with _client(Settings(api_key="k")) as http:
        refused = await http.post(
            "/v1/realtime/client_secrets", content=raw, headers={**AUTH, "content-type": "application/json"}
        )
    assert refused.status_code == 422 and message in refused.json()["error"]["message"]
