"""omnivox as an MCP client: list a server's tools, call one, within a bounded time.

The official ``mcp`` SDK (the ``mcp`` extra) speaks to the server: streamable HTTP, or SSE for a
URL whose path ends in ``/sse``. Each listing and each call opens its own connection and closes it
(a killed or restarted server costs one call, never a session), bounded by ``timeout_s``. Failures
are ``McpFailure`` with the kind the Realtime API's items name (``http_error``: unreachable, slow or
an HTTP status; ``protocol_error``: the server broke the protocol; ``tool_execution_error``: the
tool itself failed).

An MCP URL is an outbound request the client chooses, so it is checked like one (``check_url``):
loopback, private, link-local and other non-public addresses are refused unless allowed
(``mcp_allow_private``), or a session could reach the worker's own network. It is checked when a
session names it and again before every listing and call (a name may resolve elsewhere later).

Headers (authorization) go to the server and nowhere else: nothing here logs them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

FailureKind = Literal["http_error", "protocol_error", "tool_execution_error"]
UNREACHABLE, TIMED_OUT = 502, 504  # http_error codes for a server that never answered
STOP_POLL_S = 0.05  # how often a blocking call looks at its reply's stop event
# A call's output kept (the item's, the LLM's): a tool that returns a whole database would otherwise
# fill the session's memory and the LLM's context
MAX_OUTPUT_CHARS = 32_000


class McpFailure(Exception):
    """An MCP listing or call failed; ``kind`` and ``code`` are the item's ``error`` object."""

    def __init__(self, kind: FailureKind, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code

    def wire(self) -> dict[str, Any]:
        """As an ``mcp_call`` item's ``error``."""
        out: dict[str, Any] = {"type": self.kind, "message": self.message}
        if self.kind != "tool_execution_error":
            out["code"] = self.code if self.code is not None else 0
        return out


@dataclass(frozen=True)
class McpServer:
    """Where a session's MCP server is and what it is sent (``headers`` never printed)."""

    label: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    allow_private: bool = False  # its URL may name a loopback or private address

    @property
    def sse(self) -> bool:
        return urlsplit(self.url).path.rstrip("/").endswith("/sse")


@dataclass(frozen=True)
class McpToolInfo:
    """A tool a server lists."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None

    @property
    def read_only(self) -> bool:
        return bool((self.annotations or {}).get("readOnlyHint"))

    def wire(self) -> dict[str, Any]:
        """As an ``mcp_list_tools`` item lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
        }


def available() -> bool:
    """Whether the ``mcp`` SDK is installed (the ``mcp`` extra)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


async def check_url(url: str, allow_private: bool) -> str | None:
    """Why ``url`` may not be reached (None: it may): every address its host resolves to must be
    public unless ``allow_private``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an MCP server_url is an http:// or https:// URL with a host"
    if allow_private:
        return None
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError:
        return f"the MCP server's host {parts.hostname!r} does not resolve"
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global:
            return (
                f"the MCP server's host {parts.hostname!r} is a loopback, private or reserved address "
                "(allowed only with mcp_allow_private)"
            )
    return None


async def list_tools(server: McpServer, timeout_s: float) -> list[McpToolInfo]:
    """The server's tools. Raises ``McpFailure``."""

    async def go() -> list[McpToolInfo]:
        await _check(server)
        async with _client(server, timeout_s) as client:
            listed = await client.list_tools()
        return [
            McpToolInfo(
                name=t.name,
                description=t.description or "",
                input_schema=dict(t.input_schema),
                annotations=t.annotations.model_dump(exclude_none=True) if t.annotations else None,
            )
            for t in listed.tools
        ]

    return await _bounded(go(), server, timeout_s)


async def call_tool(server: McpServer, name: str, arguments: str, timeout_s: float) -> str:
    """Call ``name`` with ``arguments`` (JSON text); its output as text. Raises ``McpFailure``."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        raise McpFailure("protocol_error", "the call's arguments are not JSON", -32602) from None
    if not isinstance(args, dict):
        raise McpFailure("protocol_error", "the call's arguments are not a JSON object", -32602)

    async def go() -> str:
        await _check(server)
        async with _client(server, timeout_s) as client:
            result = await client.call_tool(name, args)
        texts = [str(getattr(c, "text", "")) for c in result.content if getattr(c, "type", "") == "text"]
        text = "\n".join(t for t in texts if t)
        if result.is_error:
            raise McpFailure("tool_execution_error", text or f"tool {name} failed")
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content)
        if len(text) > MAX_OUTPUT_CHARS:
            text = text[:MAX_OUTPUT_CHARS] + f" [... {len(text) - MAX_OUTPUT_CHARS} more characters cut]"
        return text

    return await _bounded(go(), server, timeout_s)


def call_tool_blocking(
    server: McpServer, name: str, arguments: str, timeout_s: float, stop: threading.Event
) -> str:
    """``call_tool`` from a thread (a reply's output thread: the threading rule keeps it off the
    event loop), on a loop of its own; ``stop`` (a barge-in) abandons it within ``STOP_POLL_S``."""

    async def until_stopped() -> str:
        call = asyncio.ensure_future(call_tool(server, name, arguments, timeout_s))
        while not call.done():
            if stop.is_set():
                call.cancel()
                raise McpFailure("http_error", "the call was abandoned: the reply was cut", 499)
            await asyncio.wait({call}, timeout=STOP_POLL_S)
        return call.result()

    return asyncio.run(until_stopped())


async def _check(server: McpServer) -> None:
    why = await check_url(server.url, server.allow_private)
    if why is not None:
        raise McpFailure("http_error", why, 403)


def _client(server: McpServer, timeout_s: float) -> Any:
    try:
        import httpx2
        from mcp import Client
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:
        raise McpFailure(
            "protocol_error", "MCP tools need the mcp extra (pip install 'omnivox[mcp]')", -32603
        ) from None
    if server.sse:
        transport = sse_client(
            server.url, headers=server.headers, timeout=timeout_s, sse_read_timeout=timeout_s
        )
    else:
        http = httpx2.AsyncClient(headers=server.headers, timeout=httpx2.Timeout(timeout_s))
        transport = streamable_http_client(server.url, http_client=http)
    return Client(transport, read_timeout_seconds=timeout_s, cache=None)


async def _bounded(work: Any, server: McpServer, timeout_s: float) -> Any:
    """``work`` within ``timeout_s``; whatever fails is an ``McpFailure`` (never the headers)."""
    try:
        return await asyncio.wait_for(work, timeout_s)
    except McpFailure:
        raise
    except TimeoutError:
        raise McpFailure(
            "http_error", f"MCP server {server.label} did not answer in {timeout_s:g} s", TIMED_OUT
        ) from None
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            raise
        raise _failure(exc, server) from None


def _failure(exc: BaseException, server: McpServer) -> McpFailure:
    """The first cause of ``exc`` (task groups wrap them) as an ``McpFailure``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpFailure):
        return exc
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return McpFailure("http_error", f"MCP server {server.label} answered HTTP {status}", status)
    error = getattr(exc, "error", None)  # the SDK's MCPError carries the JSON-RPC error
    if error is not None and isinstance(getattr(error, "code", None), int):
        return McpFailure("protocol_error", str(getattr(error, "message", exc)), error.code)
    if isinstance(exc, OSError) or type(exc).__name__ in ("ConnectError", "ReadError", "RemoteProtocolError"):
        return McpFailure("http_error", f"MCP server {server.label} could not be reached", UNREACHABLE)
    return McpFailure("protocol_error", f"MCP server {server.label} failed: {type(exc).__name__}", -32603)
