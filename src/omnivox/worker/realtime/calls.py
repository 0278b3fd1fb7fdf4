"""The function calls one realtime response makes, as the client hears them.

The LLM writes a call in pieces (``ToolCallDelta``: the first names the call and the function, the
rest carry more of its JSON arguments). Each call is an output item of its own:

    response.output_item.added (function_call, in_progress)   conversation.item.added
    response.function_call_arguments.delta ...
    response.function_call_arguments.done                      (also when the response is cut)
    response.output_item.done (completed | incomplete)         conversation.item.done

The client runs the function and answers with a ``function_call_output`` item and a
``response.create``; the reply that follows reads the result (``Conversation.messages``).

A call of an MCP tool (``worker.realtime.mcp``) is an ``mcp_call`` item the server runs within the
reply (``voice.tool_rounds``):

    response.output_item.added (mcp_call, in_progress)         conversation.item.added
    response.mcp_call_arguments.delta ...
    response.mcp_call_arguments.done, response.mcp_call.in_progress       (it runs)
    response.mcp_call.completed | .failed                                 (its output or error)
    response.output_item.done                                  conversation.item.done

and one that needs the client's approval first is an ``mcp_approval_request`` item (added, done
with its arguments) that the client answers with an ``mcp_approval_response`` item.
"""

from __future__ import annotations

from collections.abc import Callable

from omnivox.core.ids import new_id
from omnivox.protocol.realtime import events as ev
from omnivox.voice.llm.base import ToolCallDelta
from omnivox.voice.tool_calls import ToolResult, ToolRunning
from omnivox.worker.realtime.conversation import Conversation, Item, Kind
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.server_tools import ResponseTools


class _Call:
    """A call item of the response, where it stands."""

    def __init__(self, item: Item, index: int) -> None:
        self.item = item
        self.index = index  # its output index
        self.arguments_done = False
        self.closed = False


class ResponseCalls:
    def __init__(
        self,
        response_id: str,
        events: Events,
        conversation: Conversation | None,  # None: an out-of-band response (its items join nothing)
        next_index: Callable[[Item], int],  # the output index of a new output item
        tools: ResponseTools | None = None,  # the calls the server handles (MCP, async functions)
    ) -> None:
        self.response_id = response_id
        self.events = events
        self.conversation = conversation
        self.next_index = next_index
        self.tools = tools or ResponseTools()
        self._calls: dict[int, _Call] = {}  # the reply's call index -> its item
        self._by_id: dict[str, _Call] = {}  # call id -> the same

    def __bool__(self) -> bool:
        return bool(self._calls)

    def piece(self, delta: ToolCallDelta) -> None:
        """One piece of a call: the first opens its item, every one streams its arguments."""
        entry = self._calls.get(delta.index)
        if entry is None:
            item = self._item(delta.call_id or new_id("call"), delta.name or "")
            entry = self._calls[delta.index] = self._by_id[item.call_id] = _Call(item, self.next_index(item))
            self.events.put(
                ev.OutputItemAdded(response_id=self.response_id, output_index=entry.index, item=item.wire())
            )
            if self.conversation is not None:
                self.conversation.add(item)
                self.conversation.opened(item)
        item, index = entry.item, entry.index
        if delta.name and not item.name:
            item.name = delta.name
        if not delta.arguments:
            return
        item.arguments += delta.arguments
        where = {"response_id": self.response_id, "output_index": index, "item_id": item.id}
        if item.type == "function_call":
            self.events.put(
                ev.FunctionCallArgumentsDelta(call_id=item.call_id, delta=delta.arguments, **where)
            )
        elif item.type == "mcp_call":
            self.events.put(ev.McpCallArgumentsDelta(delta=delta.arguments, **where))

    def tool_step(self, step: ToolRunning | ToolResult) -> None:
        """A call the server handles started, or ended (an asynchronous function's ends at once:
        the client runs it and the reply does not wait)."""
        entry = self._by_id.get(step.call_id)
        if entry is None or entry.closed:
            return
        item = entry.item
        if isinstance(step, ToolRunning):
            self._arguments_done(entry)
            if item.type == "mcp_call":
                self.events.put(ev.McpCallInProgress(item_id=item.id, output_index=entry.index))
            return
        if item.type == "function_call":
            item.status = "completed"
            self._close(entry)
            return
        item.output, item.error = step.output or "", step.error
        item.status = "completed"
        if step.error is None:
            self.events.put(ev.McpCallCompleted(item_id=item.id, output_index=entry.index))
        else:
            self.events.put(ev.McpCallFailed(item_id=item.id, output_index=entry.index))
        self._close(entry)

    def _item(self, call_id: str, name: str) -> Item:
        """A new call's item: a function call, an MCP call, or an MCP call's approval request."""
        tools = self.tools
        if not tools.is_mcp(name):
            return Item.call(call_id, name, status="in_progress", run_async=tools.is_async(name))
        approval = tools.approval_of(call_id)
        kind: Kind = "mcp_approval_request" if tools.needs_approval(name) and not approval else "mcp_call"
        return Item(
            "assistant",
            False,
            type=kind,
            call_id=call_id,
            name=name,
            server_label=tools.label(name),
            approval_request_id=approval,
            status="in_progress",
        )

    def _arguments_done(self, entry: _Call) -> None:
        if entry.arguments_done:
            return
        entry.arguments_done = True
        item = entry.item
        where = {"response_id": self.response_id, "output_index": entry.index, "item_id": item.id}
        if item.type == "function_call":
            self.events.put(
                ev.FunctionCallArgumentsDone(
                    call_id=item.call_id, name=item.name, arguments=item.arguments, **where
                )
            )
        elif item.type == "mcp_call":
            self.events.put(ev.McpCallArgumentsDone(arguments=item.arguments, **where))

    def _close(self, entry: _Call) -> None:
        entry.closed = True
        self.events.put(
            ev.OutputItemDone(response_id=self.response_id, output_index=entry.index, item=entry.item.wire())
        )
        if self.conversation is not None:
            self.conversation.closed(entry.item)

    def finish(self, completed: bool) -> None:
        """Close every call still open (``incomplete`` when the response was cut short, and an MCP
        call that never ended: cut while it ran)."""
        for entry in self._calls.values():
            if entry.closed:
                continue
            item = entry.item
            ran = item.type != "mcp_call"
            item.status = "completed" if completed and ran else "incomplete"
            self._arguments_done(entry)
            self._close(entry)
