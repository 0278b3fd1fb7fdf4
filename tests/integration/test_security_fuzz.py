"""``omnivox bench fuzz`` on a keyed server, every surface (issue 25): WebSocket protocols, WebRTC
offers, client secrets, the recordings API, uploads, SIP INVITEs and carrier stream frames. Each must
end with no server fault, the server still serving, no worker lost, and no traceback or ERROR line in
the gateway's or the worker's log."""

from __future__ import annotations

import secrets

import pytest

from cluster import cluster
from omnivox.bench.fuzz import PROTOCOLS, Target, fuzz_env, fuzz_surface
from omnivox.bench.fuzz_outcomes import Outcomes, tracebacks

KEY = secrets.token_hex(16)
FRAMES = 100
FRAMES_OF = {"webrtc_offers": 40}  # each accepted offer opens a call (~0.9 s): bench fuzz runs more


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("fuzz-keyed")
    env = fuzz_env(logs / "data", KEY)
    with cluster(workers=1, engine="cascade", log_dir=logs, **env) as c:
        yield Target(c.ws, c.url, KEY, KEY, int(env["OMNIVOX_SIP_PORT"])), logs


def _logged(logs) -> dict[str, int]:
    return {name: len(lines) for name, lines in tracebacks(logs).items()}


async def _fuzz(keyed, surface: str) -> None:
    target, logs = keyed
    before = _logged(logs)
    outcomes = Outcomes()
    frames = FRAMES_OF.get(surface, FRAMES)
    stats = await fuzz_surface(target, surface, frames, seed=11, every=frames // 2, outcomes=outcomes)
    assert stats.frames == frames
    assert outcomes.faults(surface) == 0, outcomes.of(surface)
    assert stats.failed_checks == [] and stats.worker_losses == 0 and stats.stuck_workers == 0
    new = {name: lines[before.get(name, 0) :] for name, lines in tracebacks(logs).items()}
    assert not any(new.values()), new
    if target.client_key is not None and surface not in ("sip", "recordings"):
        # every kind of request without the right key was refused
        refused = sum(
            n for o, n in outcomes.of(surface).items() if "401" in o or "403" in o or "unauthorized" in o
        )
        assert refused > 0, outcomes.of(surface)


@pytest.mark.parametrize(
    "surface", [*PROTOCOLS, "webrtc_offers", "client_secrets", "recordings", "uploads", "sip"]
)
async def test_a_keyed_server_survives_every_surface_s_fuzz(keyed, surface):
    await _fuzz(keyed, surface)


# (a carrier frame nested past Python's recursion limit used to kill its stream: carriers now read
# frames with protocol.wire.load_json)
@pytest.mark.parametrize("carrier", ["twilio", "telnyx", "plivo"])
async def test_a_keyed_server_survives_carrier_stream_fuzz(keyed, carrier):
    await _fuzz(keyed, carrier)
