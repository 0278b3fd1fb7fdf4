"""The MCP servers of one realtime session: their tools listed once, offered, called, approved.

- ``configure`` (at each ``session.update``): every MCP server's URL is checked (a refused one is
  an error naming ``session.tools.N.server_url``, and the update changes nothing); a server not
  listed yet in this session is listed in the background, as an ``mcp_list_tools`` item:

      conversation.item.added (mcp_list_tools, no tools yet)   mcp_list_tools.in_progress
      mcp_list_tools.completed | .failed                        conversation.item.done (its tools)

  The listing is kept for the session (per label, URL and headers).
- ``tools_for``: a response's MCP tools, those listed and allowed (``allowed_tools``), offered to
  the LLM with the function tools (``McpOffer``, which runs them on the reply's thread with the
  server's headers: ``worker.realtime.server_tools``).
- ``answer``: the client's ``mcp_approval_response``; an approved call runs at the start of the
  next response, a refused one is told to the LLM as refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omnivox.connection.units import WorkUnits
from omnivox.core.errors import InvalidMessage
from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.session_config import McpTool, Tool
from omnivox.voice.mcp_client import (
    McpConnections,
    McpFailure,
    McpServer,
    McpToolInfo,
    check_url,
)
from omnivox.voice.tool_calls import ServerCall, ToolResult
from omnivox.worker.realtime.conversation import Conversation, Item

log = logging.getLogger(__name__)


def server_of(tool: McpTool, allow_private: bool) -> McpServer:
    return McpServer(tool.server_label, tool.server_url, tool.request_headers(), allow_private)


@dataclass(frozen=True)
class OfferedTool:
    """An MCP tool as the LLM is offered it (``name`` is the server's name for it)."""

    server: McpTool
    info: McpToolInfo

    @property
    def needs_approval(self) -> bool:
        return self.server.needs_approval(self.info.name, self.info.read_only)

    def chat_tool(self) -> dict[str, Any]:
        schema = self.info.input_schema or {"type": "object", "properties": {}}
        fn = {"name": self.info.name, "description": self.info.description, "parameters": schema}
        return {"type": "function", "function": fn}


@dataclass(frozen=True)
class McpOffer:
    """What a response may do with the session's MCP servers: their tools it offers (by the name
    the LLM calls), the calls approved since the last response, each call's approval request."""

    offered: dict[str, OfferedTool] = field(default_factory=dict)
    approved: tuple[ServerCall, ...] = ()
    approval_of: dict[str, str] = field(default_factory=dict)  # call id -> its request's item id
    allow_private: bool = False  # the servers may be on loopback or private addresses
    connections: McpConnections | None = None  # the session's, kept open across calls

    def call(self, call: ServerCall, timeout_s: float, stop: threading.Event) -> ToolResult:
        """Run ``call`` on its server (blocking: the reply's thread); a failure is its result."""
        tool = self.offered.get(call.name)
        if tool is None or self.connections is None:
            error = McpFailure("protocol_error", f"no MCP tool {call.name!r} is offered", -32601)
            return ToolResult(call.call_id, error=error.wire())
        try:
            server = server_of(tool.server, self.allow_private)
            output = self.connections.call_tool_blocking(server, call.name, call.arguments, timeout_s, stop)
        except McpFailure as failure:
            log.info("mcp call %s on %s failed: %s", call.name, tool.server.server_label, failure.message)
            return ToolResult(call.call_id, error=failure.wire())
        return ToolResult(call.call_id, output=output)


class SessionMcp:
    def __init__(
        self,
        conversation: Conversation,
        emit: Callable[[Any], None],
        units: WorkUnits,
        *,
        allow_private: bool,
        timeout_s: float,
    ) -> None:
        self.conversation = conversation
        self.emit = emit
        self.units = units
        self.allow_private = allow_private
        self.timeout_s = timeout_s
        self._listed: dict[tuple[str, str, str], list[McpToolInfo] | None] = {}  # None: listing
        self._approved: list[Item] = []  # approval requests approved, not yet run
        self.connections = McpConnections()  # one per server, open for the session's life

    async def close(self) -> None:
        """The session ended: its connections to its MCP servers close."""
        await self.connections.close()

    async def check(self, tools: list[Tool], param: str) -> None:
        """Refuse MCP servers whose URL may not be reached (``param``: where the tools are)."""
        for n, tool in enumerate(tools):
            if isinstance(tool, McpTool):
                why = await check_url(tool.server_url, self.allow_private)
                if why is not None:
                    raise InvalidMessage(why, param=f"{param}.{n}.server_url")

    async def configure(self, tools: list[Tool], wait: bool = False) -> None:
        """List the tools of each MCP server not listed yet in this session: in the background (a
        session update), or before returning (``wait``: a response's own servers)."""
        for tool in tools:
            if isinstance(tool, McpTool) and _key(tool) not in self._listed:
                self._listed[_key(tool)] = None
                if wait:
                    await self._list(tool)
                else:
                    await self.units.start(f"mcp_list:{tool.server_label}", self._list(tool))

    def tools_for(self, tools: list[Tool]) -> McpOffer:
        """The MCP tools a response offers (``tools``: its tools, the session's or its own), and the
        calls approved since the last response (handed over once)."""
        offered: dict[str, OfferedTool] = {}
        for tool in tools:
            if isinstance(tool, McpTool):
                for info in self._listed.get(_key(tool)) or []:
                    if tool.allows(info.name, info.read_only):
                        offered.setdefault(info.name, OfferedTool(tool, info))
        approved, self._approved = self._approved, []
        calls = tuple(ServerCall(i.call_id, i.name, i.arguments) for i in approved if i.name in offered)
        return McpOffer(
            offered, calls, {i.call_id: i.id for i in approved}, self.allow_private, self.connections
        )

    def answer(self, request: Item, approve: bool) -> None:
        """The client answered ``request`` (an ``mcp_approval_request``): an approved call runs at
        the start of the next response."""
        if approve:
            self._approved.append(request)

    async def _list(self, tool: McpTool) -> None:
        item = Item("assistant", False, type="mcp_list_tools", server_label=tool.server_label, tools=[])
        item.status = "in_progress"
        self.conversation.add(item)
        self.conversation.opened(item)
        self.emit(ev.McpListToolsInProgress(item_id=item.id))
        try:
            listed = await self.connections.list_tools(server_of(tool, self.allow_private), self.timeout_s)
        except McpFailure as failure:
            log.warning("mcp server %s: listing its tools failed: %s", tool.server_label, failure.message)
            self._listed.pop(_key(tool), None)  # the next session.update tries again
            item.status = "incomplete"
            self.emit(ev.McpListToolsFailed(item_id=item.id))
        else:
            self._listed[_key(tool)] = listed
            item.tools = [t.wire() for t in listed if tool.allows(t.name, t.read_only)]
            item.status = "completed"
            self.emit(ev.McpListToolsCompleted(item_id=item.id))
        self.conversation.closed(item)


def _key(tool: McpTool) -> tuple[str, str, str]:
    """A listing is the session's per server label, URL and headers (a new token lists again)."""
    headers = "\n".join(f"{k}:{v}" for k, v in sorted(tool.request_headers().items()))
    return tool.server_label, tool.server_url, headers
