"""A real MCP server (the ``mcp`` SDK's MCPServer, FastMCP's successor) for the tests of MCP tools.

Run as a process (``python tests/mcp_tool_server.py PORT http|sse TOKEN``; ``ToolServer`` starts
one) so a test can kill it mid-call. Its tools: ``add`` (fast), ``slow_lookup`` (sleeps),
``broken`` (raises), ``ramble`` (a huge output), ``delete_note`` (the tests make it need
approval), ``whats_on`` (annotated read-only). Every request must carry ``Authorization: Bearer
TOKEN``; the log file named last records each call's name, so a test knows what ran.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse

from omnivox.testing.cluster import free_port

server = MCPServer("omnivox-test-tools")
TOKEN = "mcp-secret-7d1f"  # what the tests' servers demand
LOG: Path | None = None


def ran(name: str) -> None:
    if LOG is not None:
        with LOG.open("a") as f:
            f.write(name + "\n")


@server.tool(description="Add two whole numbers.")
def add(a: int, b: int) -> str:
    ran("add")
    return f"{a + b}"


@server.tool(description="Look something up (slowly).")
async def slow_lookup(seconds: float) -> str:
    ran("slow_lookup")
    await asyncio.sleep(seconds)
    return "found it"


@server.tool(description="A tool that always fails.")
def broken() -> str:
    ran("broken")
    raise ValueError("the database is on fire")


@server.tool(description="Delete a note.")
def delete_note(title: str) -> str:
    ran("delete_note")
    return f"deleted {title}"


@server.tool(description="A very long answer.")
def ramble(n: int) -> str:
    ran("ramble")
    return "la " * n


@server.tool(description="What is on today.", annotations=ToolAnnotations(readOnlyHint=True))
def whats_on() -> str:
    ran("whats_on")
    return "a concert"


class ToolServer:
    """This server on a loopback port, in a process of its own (``port``: the one a server before
    it had, to stand for that server restarted)."""

    def __init__(self, transport: str, log: Path, port: int | None = None) -> None:
        self.transport = transport
        self.port = port or free_port()
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.port), transport, TOKEN, str(log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        path = "/mcp" if transport == "http" else "/sse"
        self.url = f"http://127.0.0.1:{self.port}{path}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the MCP test server did not start")

    def ran(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def restarted(self) -> ToolServer:
        """Killed, and a new one on its port (it knows none of the old one's MCP sessions)."""
        self.stop()
        return ToolServer(self.transport, self.log, self.port)


def main() -> None:
    global LOG
    port, transport, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    LOG = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    app = server.streamable_http_app() if transport == "http" else server.sse_app()

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            if Request(scope).headers.get("authorization") != f"Bearer {token}":
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
