"""The MCP client's checks and failures (its calls to a real server:
tests/integration/test_realtime_mcp.py)."""

from __future__ import annotations

import pytest

from omnivox.voice.mcp_client import McpFailure, McpServer, call_tool, check_url, list_tools


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/mcp",
        "http://[::1]/mcp",
        "http://10.0.0.5/mcp",
        "http://192.168.1.2/sse",
        "http://169.254.169.254/latest",  # cloud metadata
        "http://0.0.0.0/mcp",
        "http://localhost/mcp",
    ],
)
async def test_private_and_loopback_urls_are_refused_unless_allowed(url):
    why = await check_url(url, allow_private=False)
    assert why is not None and "mcp_allow_private" in why
    assert await check_url(url, allow_private=True) is None


async def test_public_addresses_and_bad_urls():
    assert await check_url("https://8.8.8.8/mcp", allow_private=False) is None
    assert await check_url("ftp://8.8.8.8/mcp", allow_private=True) is not None
    assert await check_url("http:///mcp", allow_private=True) is not None


def test_failures_have_the_items_error_shapes():
    assert McpFailure("http_error", "slow", 504).wire() == {
        "type": "http_error",
        "message": "slow",
        "code": 504,
    }
    assert McpFailure("tool_execution_error", "boom").wire() == {
        "type": "tool_execution_error",
        "message": "boom",
    }
    assert McpFailure("protocol_error", "bad").wire()["code"] == 0


def test_a_server_never_prints_its_headers_and_sse_is_chosen_by_path():
    server = McpServer("notes", "http://x/sse", {"Authorization": "Bearer secret"})
    assert "secret" not in repr(server) and server.sse
    assert not McpServer("notes", "http://x/mcp").sse


async def test_a_listing_or_call_checks_the_url_again_before_connecting():
    server = McpServer("notes", "http://127.0.0.1:9/mcp")  # never reached: refused first
    for attempt in (list_tools(server, 1.0), call_tool(server, "add", "{}", 1.0)):
        with pytest.raises(McpFailure) as failure:
            await attempt
        assert (failure.value.kind, failure.value.code) == ("http_error", 403)
