"""A session's MCP connections (``voice.mcp_client.McpConnections``) against a real MCP server
(``mcp_tool_server.py``, the ``mcp`` SDK's, in a process of its own): one connection per server kept
across listings and calls, closed when the session ends (the server sees it go), opened again once
when it dropped (the server killed and restarted), and a call abandoned by a barge-in."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from mcp_tool_server import TOKEN, ToolServer
from omnivox.voice.mcp_client import McpConnections, McpFailure, McpServer

TIMEOUT_S = 5.0


def _server(tools: ToolServer) -> McpServer:
    return McpServer("notes", tools.url, {"Authorization": f"Bearer {TOKEN}"}, allow_private=True)


def _established(tools: ToolServer) -> int:
    """TCP connections the MCP server process holds open with a client."""
    conns = psutil.Process(tools.proc.pid).net_connections(kind="tcp")
    return sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED)


async def _until(check: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.fixture(params=["http", "sse"])
def tools(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolServer]:
    server = ToolServer(request.param, tmp_path / "calls.log")
    yield server
    server.stop()


async def test_one_connection_per_server_is_kept_across_calls_and_closed_with_the_session(tools):
    connections = McpConnections()
    server = _server(tools)
    listed = await connections.list_tools(server, TIMEOUT_S)
    assert "add" in {t.name for t in listed}
    outputs = [
        await connections.call_tool(server, "add", f'{{"a": {i}, "b": 1}}', TIMEOUT_S) for i in range(3)
    ]
    # and from a reply's thread, as a response calls it
    blocking = connections.call_tool_blocking
    outputs.append(
        await asyncio.to_thread(blocking, server, "add", '{"a":5,"b":5}', TIMEOUT_S, threading.Event())
    )
    assert outputs == ["1", "2", "3", "10"]
    assert connections.opened == 1 and connections.open_count == 1  # one handshake for them all
    assert tools.ran() == ["add"] * 4
    assert _established(tools) >= 1
    await connections.close()  # the session ended
    assert connections.open_count == 0
    assert await _until(lambda: _established(tools) == 0), "the server still holds a connection"
    assert not any(t.name == "mcp-connections" for t in threading.enumerate())
    with pytest.raises(McpFailure):  # nothing is opened again after the end
        await connections.call_tool(server, "add", '{"a":1,"b":1}', TIMEOUT_S)


async def test_a_kept_connection_that_dropped_is_opened_again_once(tools):
    connections = McpConnections()
    server = _server(tools)
    try:
        assert await connections.call_tool(server, "add", '{"a":1,"b":2}', TIMEOUT_S) == "3"
        tools.stop()  # down: a call fails as unreachable (that call, not the ones after) ...
        with pytest.raises(McpFailure) as down:
            await connections.call_tool(server, "add", '{"a":1,"b":2}', TIMEOUT_S)
        assert down.value.kind == "http_error", (down.value.kind, down.value.code, down.value.message)
        tools.proc = ToolServer(tools.transport, tools.log, tools.port).proc  # ... back on its port
        assert await connections.call_tool(server, "add", '{"a":2,"b":2}', TIMEOUT_S) == "4"
        tools.proc = tools.restarted().proc  # restarted between two calls: it knows no session of ours
        assert await connections.call_tool(server, "add", '{"a":3,"b":2}', TIMEOUT_S) == "5"
        assert connections.open_count == 1
    finally:
        await connections.close()


async def test_a_barge_in_abandons_a_call_and_the_connection_serves_the_next(tools):
    connections = McpConnections()
    server = _server(tools)
    stop = threading.Event()
    try:
        assert await connections.call_tool(server, "add", '{"a":1,"b":1}', TIMEOUT_S) == "2"
        threading.Timer(0.3, stop.set).start()
        with pytest.raises(McpFailure) as cut:
            await asyncio.to_thread(
                connections.call_tool_blocking, server, "slow_lookup", '{"seconds": 3}', TIMEOUT_S, stop
            )
        assert cut.value.code == 499
        assert await connections.call_tool(server, "add", '{"a":2,"b":1}', TIMEOUT_S) == "3"
        assert connections.opened == 1
    finally:
        await connections.close()
