"""Bad input on the live SIP port: seeded hostile SIP (``bench.sip_fuzz``: mutated INVITEs, SDP
with nothing usable or far too much, lying lengths, other methods on no dialog, random bytes; over
UDP, then TCP with messages cut off) at a real gateway. It stays up, answers what it can, leaks no
call, RTP port or session, and a well-formed call still goes through afterwards.

The gateway has no key (so loopback INVITEs are taken: the fuzz reaches SDP, ports and sessions,
not only the 401), no INVITE rate limit, at most 4 calls, and hangs up after a second of silence;
no worker, so the calls it answers wait in the queue until they end.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from cluster import cluster, free_port
from omnivox.bench.sip_caller import SipCaller
from omnivox.bench.sip_fuzz import fuzz_sip


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    port = free_port()
    rtp = 35000 + (port % 100) * 10
    env = {
        "OMNIVOX_SIP_PORT": str(port),
        "OMNIVOX_SIP_INVITE_RATE": "0",
        "OMNIVOX_SIP_MAX_CALLS": "4",
        "OMNIVOX_RTP_PORT_MIN": str(rtp),
        "OMNIVOX_RTP_PORT_MAX": str(rtp + 9),
        "OMNIVOX_PHONE_PROFILES": json.dumps({"default": {"idle_timeout_s": 1}}),
    }
    with cluster(workers=0, log_dir=tmp_path_factory.mktemp("sipfuzz"), **env) as c:
        c.sip_port = port  # type: ignore[attr-defined]
        yield c


def held(c) -> tuple[float, float, int]:
    """Calls, RTP ports and phone sessions the gateway holds."""
    sessions = httpx.get(c.url + "/api/sessions").json()["sessions"]
    rtc = sum(1 for s in sessions if s["session_id"].startswith("rtc"))
    return c.metric("omnivox_sip_calls"), c.metric("omnivox_rtp_ports_in_use"), rtc


async def settled(c, within_s: float = 15.0) -> None:
    deadline = time.monotonic() + within_s
    while (now := await asyncio.to_thread(held, c)) != (0, 0, 0):
        assert time.monotonic() < deadline, f"still held (calls, ports, sessions): {now}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("seed", [1, 2])
async def test_hostile_sip_leaves_the_gateway_serving_and_holding_nothing(gateway, seed):
    stats = await fuzz_sip(("127.0.0.1", gateway.sip_port), 600, seed)
    assert stats.sent_udp > 500 and stats.sent_tcp > 100
    assert stats.answers > 50  # it answered (100 Trying, 400, 486, 488, 481, ...) as it went
    assert gateway.gateway is not None and gateway.gateway.poll() is None
    assert httpx.get(gateway.url + "/health").status_code == 200
    await settled(gateway)  # the calls it took ended (idle), their ports and sessions with them
    caller = SipCaller()
    try:
        status = await caller.dial(f"sip:agent@127.0.0.1:{gateway.sip_port}", ("127.0.0.1", gateway.sip_port))
        assert status == 200, caller.responses
        assert (await asyncio.to_thread(held, gateway))[:2] == (1, 1)
        caller.hang_up()
    finally:
        await caller.close()
    await settled(gateway)
