"""Tools the server runs itself during a reply (MCP tools), as a reply sees them.

The LLM calls them like any function (``ToolCallDelta``); a reply whose request carries
``ServerTools`` runs the ones they run (``voice.tool_rounds``) and says so in its pieces:
``ToolRunning`` when a call starts, ``ToolResult`` with its output or failure when it ends. A call
that needs the client's approval first is not run in the reply that makes it; an approved one is
given to the next reply (``ServerCall``), which runs it before the LLM speaks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ServerCall:
    """A complete call of a tool the server runs."""

    call_id: str
    name: str
    arguments: str  # JSON text


@dataclass(frozen=True)
class ToolRunning:
    """The server started running call ``call_id``."""

    call_id: str


@dataclass(frozen=True)
class ToolResult:
    """Call ``call_id`` ended: its ``output``, or its ``error`` (the item's error object)."""

    call_id: str
    output: str | None = None
    error: dict[str, Any] | None = None

    def for_llm(self) -> str:
        """What the LLM reads of it (a failure too: it tells the user rather than waiting)."""
        if self.error is None:
            return self.output or ""
        return f"error: the tool call failed ({self.error.get('message', 'unknown error')})"


class ServerTools(Protocol):
    """The tools of one reply that the server runs (the realtime session's MCP servers)."""

    def runs(self, name: str) -> bool:
        """Whether the server runs the tool the LLM calls ``name``."""
        ...

    def needs_approval(self, name: str) -> bool:
        """Whether a call of ``name`` waits for the client's approval."""
        ...

    def approved(self) -> tuple[ServerCall, ...]:
        """Calls the client approved since the last reply: run before the LLM speaks."""
        ...

    def call(self, call: ServerCall, stop: threading.Event) -> ToolResult:
        """Run ``call`` (blocking, bounded in time; ``stop`` abandons it); never raises."""
        ...
