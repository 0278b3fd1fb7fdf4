"""The calls one response's reply handles on the server's side (``voice.tool_calls.ServerTools``).

- MCP tools (``worker.realtime.mcp``): run on their server, within the session's timeout; one that
  needs approval waits for the client's answer.
- Asynchronous functions (``omnivox.async_function_calls``, or a function tool's ``async``): the
  client runs them while the reply goes on. The reply does not wait: the LLM is told the result
  comes later (``ASYNC_PENDING``) and speaks on; the client's ``function_call_output``, when it
  comes, starts a response of its own (``worker.realtime.async_outputs``).

Made on the event loop when the response is planned, read on the reply's thread, never changed
but for ``said``: a reply prepared in the user's pause runs ahead of being said (and may be dropped
unheard), so no call runs until the response has begun (``ReplyStarted`` sets it): a tool's side
effects never come from a reply the user did not hear.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from omnivox.voice.tool_calls import ServerCall, ToolResult
from omnivox.worker.realtime.mcp import McpOffer

WAIT_POLL_S = 0.05  # how often a call waiting for its response to begin looks at the reply's stop
ASYNC_PENDING = "the function is running and its result will come later; say so briefly and go on"


@dataclass(frozen=True)
class ResponseTools:
    mcp: McpOffer = field(default_factory=McpOffer)
    timeout_s: float = 30.0  # an MCP call's bound
    async_functions: frozenset[str] = frozenset()  # functions the client runs without the reply waiting
    said: threading.Event = field(default_factory=threading.Event, compare=False)  # the response began

    def __bool__(self) -> bool:
        return bool(self.mcp.offered or self.mcp.approved or self.async_functions)

    def is_mcp(self, name: str) -> bool:
        return name in self.mcp.offered

    def is_async(self, name: str) -> bool:
        return name in self.async_functions and not self.is_mcp(name)

    def label(self, name: str) -> str:
        """The MCP server of tool ``name``."""
        return self.mcp.offered[name].server.server_label

    def approval_of(self, call_id: str) -> str:
        """The approval request an approved call answers ("" for none)."""
        return self.mcp.approval_of.get(call_id, "")

    # ---- ServerTools

    def runs(self, name: str) -> bool:
        return self.is_mcp(name) or self.is_async(name)

    def needs_approval(self, name: str) -> bool:
        return self.is_mcp(name) and self.mcp.offered[name].needs_approval

    def approved(self) -> tuple[ServerCall, ...]:
        return self.mcp.approved

    def call(self, call: ServerCall, stop: threading.Event) -> ToolResult:
        while not self.said.wait(WAIT_POLL_S):
            if stop.is_set():  # dropped unheard: it never runs
                error = {"type": "http_error", "code": 499, "message": "the reply was dropped before it ran"}
                return ToolResult(call.call_id, error=error)
        if self.is_async(call.name):
            return ToolResult(call.call_id, output=ASYNC_PENDING)
        return self.mcp.call(call, self.timeout_s, stop)
