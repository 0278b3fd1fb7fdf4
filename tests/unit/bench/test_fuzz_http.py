"""The HTTP fuzz's requests: seeded, on the surface's paths, with every kind of body."""

from __future__ import annotations

import itertools

from omnivox.bench.fuzz_http import (
    Context,
    recordings_requests,
    secrets_requests,
    uploads_requests,
    webrtc_requests,
)

OFFER = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n"
CTX = Context(OFFER, ["rec-1"], {"rec-1": "1.abc"}, "ek_x")


def take(source, n):
    return list(itertools.islice(source, n))


def test_each_surface_stays_on_its_paths():
    cases = [
        (webrtc_requests(CTX, False, 0), "/v1/realtime/calls"),
        (secrets_requests(False, 0), "/v1/realtime/client_secrets"),
        (recordings_requests(CTX, False, 0), "/api/recordings"),
        (uploads_requests(False, 0), "/api/assets/ref_audio"),
    ]
    for source, prefix in cases:
        requests = take(source, 200)
        assert all(r.path.startswith(prefix) for _, r in requests), prefix
        assert len({k for k, _ in requests}) >= 4, prefix


def test_requests_are_seeded():
    one = [(k, r.path, r.body) for k, r in take(webrtc_requests(CTX, True, 5), 100)]
    two = [(k, r.path, r.body) for k, r in take(webrtc_requests(CTX, True, 5), 100)]
    assert one == two


def test_a_keyed_server_also_gets_requests_without_the_right_key():
    auths = {r.auth for _, r in take(secrets_requests(True, 0), 300)}
    assert {"client", "none", "wrong", "ephemeral"} <= auths
    assert {r.auth for _, r in take(secrets_requests(False, 0), 300)} == {"client"}


def test_some_bodies_pass_the_limits():
    bodies = [r.body or b"" for _, r in take(secrets_requests(False, 0), 400)]
    assert any(len(b) > 1024 * 1024 for b in bodies)
