"""Where a sideband that belongs to another gateway is proxied to."""

from __future__ import annotations

import pytest

from omnivox.gateway.edges.elsewhere import _ws_url


@pytest.mark.parametrize(
    ("base", "path", "query", "url"),
    [
        ("http://gw-b:8000", "/v1/realtime", "call_id=c1", "ws://gw-b:8000/v1/realtime?call_id=c1"),
        ("https://gw-b.example/", "/v1/realtime", "call_id=c1", "wss://gw-b.example/v1/realtime?call_id=c1"),
        ("http://gw-b:8000/", "/v1/realtime", "", "ws://gw-b:8000/v1/realtime"),
        ("gw-b:8000", "/p", "", "ws://gw-b:8000/p"),  # no scheme: plain
    ],
)
def test_a_gateways_base_url_becomes_its_websocket_url(base, path, query, url) -> None:
    assert _ws_url(base, path, query) == url
