"""omnivox as an MCP client: list a server's tools, call one, within a bounded time.

The official ``mcp`` SDK (the ``mcp`` extra) speaks to the server: streamable HTTP, or SSE for a
URL whose path ends in ``/sse``. A session keeps one connection per server open for its life
(``McpConnections``: a connection costs a TCP connect and the MCP handshake, ~65 ms a call on
loopback), closed when the session ends; one that dropped (a server killed or restarted) is opened
again once, so it costs one call at most, never a session. ``list_tools``/``call_tool`` open a
connection for one listing or call. Each is bounded by ``timeout_s``. Failures
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
import concurrent.futures
import contextlib
import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

T = TypeVar("T")
FailureKind = Literal["http_error", "protocol_error", "tool_execution_error"]
UNREACHABLE, TIMED_OUT = 502, 504  # http_error codes for a server that never answered
INVALID_REQUEST = -32600  # JSON-RPC's; the SDK's word for a session the server no longer knows
CONNECTION_CLOSED = -32000  # the SDK's: the transport closed under a request (the server went)
STOP_POLL_S = 0.05  # how often a blocking call looks at its reply's stop event
CLOSE_WITHIN_S = 2.0  # a connection's goodbye at a session's end, before it is cut
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
    """The server's tools, over a connection of its own. Raises ``McpFailure``."""

    async def go() -> list[McpToolInfo]:
        await _check(server)
        async with _client(server, timeout_s) as client:
            return await _listed(client)

    return await _bounded(go(), server, timeout_s)


async def call_tool(server: McpServer, name: str, arguments: str, timeout_s: float) -> str:
    """Call ``name`` with ``arguments`` (JSON text) over a connection of its own; its output as
    text. Raises ``McpFailure``."""
    args = _arguments(arguments)

    async def go() -> str:
        await _check(server)
        async with _client(server, timeout_s) as client:
            return await _called(client, name, args)

    return await _bounded(go(), server, timeout_s)


ServerKey = tuple[str, str, tuple[tuple[str, str], ...]]  # label, URL, headers: one connection each


@dataclass
class _Connection:
    """One open connection, held by the task that opened it (the SDK's connection must be closed by
    the task that opened it), until ``closing`` is set."""

    ready: asyncio.Future[Any]  # the SDK's client, once its handshake is done
    closing: asyncio.Event
    task: asyncio.Task[None]

    @property
    def dropped(self) -> bool:
        return self.task.done()


class McpConnections:
    """One session's connections to its MCP servers: one per server (label, URL, headers), opened on
    first use and kept until ``close``. They live on a loop of their own, in one thread, because
    calls come from a reply's thread (``call_tool_blocking``) and listings from the session's loop,
    and a connection belongs to the loop that opened it. A kept connection that fails as a dropped
    one does (refused, reset, or the server no longer knows its MCP session: it restarted) is
    opened again once per listing or call; a timeout or a tool's own error is never retried."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the loop's start and stop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._open: dict[ServerKey, _Connection] = {}  # (the loop's own: touched only there)
        self._opening: dict[ServerKey, asyncio.Lock] = {}
        self.opened = 0  # connections opened in this session's life (a figure for tests and benches)

    @property
    def open_count(self) -> int:
        """Connections open now (0 once closed)."""
        return sum(1 for c in list(self._open.values()) if not c.dropped)

    async def list_tools(self, server: McpServer, timeout_s: float) -> list[McpToolInfo]:
        """The server's tools, over the session's connection to it. Raises ``McpFailure``."""
        return await asyncio.wrap_future(self._submit(self._use(server, timeout_s, _listed)))

    async def call_tool(self, server: McpServer, name: str, arguments: str, timeout_s: float) -> str:
        """``call_tool`` over the session's connection to the server. Raises ``McpFailure``."""
        args = _arguments(arguments)
        work = self._use(server, timeout_s, lambda client: _called(client, name, args))
        return await asyncio.wrap_future(self._submit(work))

    def call_tool_blocking(
        self, server: McpServer, name: str, arguments: str, timeout_s: float, stop: threading.Event
    ) -> str:
        """``call_tool`` from a thread (a reply's output thread: the threading rule keeps it off the
        session's loop); ``stop`` (a barge-in) abandons it within ``STOP_POLL_S``."""
        args = _arguments(arguments)
        call = self._submit(self._use(server, timeout_s, lambda client: _called(client, name, args)))
        while True:
            try:
                return call.result(timeout=STOP_POLL_S)
            except concurrent.futures.TimeoutError:
                if stop.is_set():
                    call.cancel()
                    raise McpFailure("http_error", "the call was abandoned: the reply was cut", 499) from None
            except concurrent.futures.CancelledError:
                raise McpFailure("http_error", "the call was abandoned: the session ended", 499) from None

    async def close(self) -> None:
        """Close every connection and stop the loop (the session ended); later uses fail."""
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # (a loop already stopped)
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close_all(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 5.0)

    # ---- on the connections' own loop

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                work.close()
                raise McpFailure("http_error", "the session's MCP connections are closed", UNREACHABLE)
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="mcp-connections", daemon=True
                )
                self._thread.start()
            return asyncio.run_coroutine_threadsafe(work, self._loop)

    async def _use(self, server: McpServer, timeout_s: float, work: Callable[[Any], Awaitable[T]]) -> T:
        async def go() -> T:
            await _check(server)
            key = _key(server)
            for attempt in (1, 2):
                connection, kept = await self._connection(key, server, timeout_s)
                try:
                    return await work(await asyncio.shield(connection.ready))
                except McpFailure:
                    raise  # the tool's own error: the connection is fine
                except Exception as exc:
                    self._drop(key, connection)
                    if attempt == 2 or not kept or not _dropped(exc, server):
                        raise
                    log.info("mcp server %s: its kept connection dropped; connecting again", server.label)
            raise AssertionError("unreachable")

        return await _bounded(go(), server, timeout_s)

    async def _connection(
        self, key: ServerKey, server: McpServer, timeout_s: float
    ) -> tuple[_Connection, bool]:
        """The open connection to ``server`` (opened now if there is none); whether it was kept."""
        async with self._opening.setdefault(key, asyncio.Lock()):
            connection = self._open.get(key)
            if connection is not None and not connection.dropped:
                return connection, True
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            closing = asyncio.Event()
            task = asyncio.ensure_future(_hold(server, timeout_s, ready, closing))
            connection = self._open[key] = _Connection(ready, closing, task)
            self.opened += 1
            return connection, False

    def _drop(self, key: ServerKey, connection: _Connection) -> None:
        connection.closing.set()
        if self._open.get(key) is connection:
            del self._open[key]

    async def _close_all(self) -> None:
        connections = list(self._open.values())
        self._open.clear()
        for connection in connections:
            connection.closing.set()
        tasks = [c.task for c in connections]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=CLOSE_WITHIN_S)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=CLOSE_WITHIN_S)


async def _hold(
    server: McpServer, timeout_s: float, ready: asyncio.Future[Any], closing: asyncio.Event
) -> None:
    """Open a connection, hand it over through ``ready``, and keep it until ``closing``."""
    try:
        async with _client(server, timeout_s) as client:
            if not ready.done():
                ready.set_result(client)
            await closing.wait()
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError("closed"))
            ready.exception()  # (marked retrieved: its user may have timed out meanwhile)
        if isinstance(exc, asyncio.CancelledError):
            raise
    finally:
        if not ready.done():  # closed before its handshake answered
            ready.set_exception(ConnectionError("the connection was closed"))
            ready.exception()


def _key(server: McpServer) -> ServerKey:
    return server.label, server.url, tuple(sorted(server.headers.items()))


def _dropped(exc: BaseException, server: McpServer) -> bool:
    """Whether a kept connection failed as one that dropped does (worth opening again once)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if type(exc).__name__ in ("ClosedResourceError", "BrokenResourceError", "EndOfStream"):
        return True
    failure = _failure(exc, server)
    # unreachable, or the server no longer knows the connection's MCP session (it restarted: 404,
    # which the SDK words as an invalid request)
    return failure.code in (UNREACHABLE, 404, INVALID_REQUEST)


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        raise McpFailure("protocol_error", "the call's arguments are not JSON", -32602) from None
    if not isinstance(args, dict):
        raise McpFailure("protocol_error", "the call's arguments are not a JSON object", -32602)
    return args


async def _listed(client: Any) -> list[McpToolInfo]:
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


async def _called(client: Any, name: str, args: dict[str, Any]) -> str:
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
    if error is not None and getattr(error, "code", None) == CONNECTION_CLOSED:
        return McpFailure("http_error", f"MCP server {server.label}: the connection closed", UNREACHABLE)
    if error is not None and isinstance(getattr(error, "code", None), int):
        return McpFailure("protocol_error", str(getattr(error, "message", exc)), error.code)
    if isinstance(exc, OSError) or type(exc).__name__ in ("ConnectError", "ReadError", "RemoteProtocolError"):
        return McpFailure("http_error", f"MCP server {server.label} could not be reached", UNREACHABLE)
    return McpFailure("protocol_error", f"MCP server {server.label} failed: {type(exc).__name__}", -32603)
