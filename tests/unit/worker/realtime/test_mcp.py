"""A session's MCP tools as its client and its LLM see them: the calls' items and events, approval
requests, what the LLM reads of each, and the URLs refused (the servers themselves:
tests/integration/test_realtime_mcp.py)."""

from __future__ import annotations

import threading

import pytest

from event_recorder import Recorder
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import InvalidMessage, ItemNotFound
from omnivox.protocol.realtime.session_config import FunctionTool, McpTool
from omnivox.voice.llm.base import ToolCallDelta
from omnivox.voice.mcp_client import McpToolInfo
from omnivox.voice.tool_calls import ServerCall, ToolResult, ToolRunning
from omnivox.worker.realtime.calls import ResponseCalls
from omnivox.worker.realtime.conversation import DENIED, Conversation, Item
from omnivox.worker.realtime.mcp import McpOffer, OfferedTool, SessionMcp
from omnivox.worker.realtime.server_tools import ASYNC_PENDING, ResponseTools

SERVER = McpTool(type="mcp", server_label="notes", server_url="https://tools.example.com/mcp")


def offered(approval: bool = False, approval_of: dict | None = None) -> ResponseTools:
    server = SERVER.model_copy(update={"require_approval": "always" if approval else "never"})
    info = McpToolInfo("lookup", "Look up", {"type": "object", "properties": {}})
    return ResponseTools(McpOffer({"lookup": OfferedTool(server, info)}, approval_of=approval_of or {}), 5.0)


def make(mcp: ResponseTools, conversation: Conversation | None = None):
    events = Recorder()
    counter = iter(range(100))
    return ResponseCalls("resp_1", events, conversation, lambda item: next(counter), mcp), events


def test_an_mcp_call_streams_runs_and_closes_with_its_output():
    conversation = Conversation()
    calls, events = make(offered(), conversation)
    calls.piece(ToolCallDelta(0, "call_a", "lookup", '{"q":'))
    calls.piece(ToolCallDelta(0, arguments=" 1}"))
    calls.tool_step(ToolRunning("call_a"))
    calls.tool_step(ToolResult("call_a", output="found"))
    calls.finish(True)  # already closed: nothing more
    assert events.types() == [
        "response.output_item.added",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    item = events.sent[-1].item
    assert item["type"] == "mcp_call" and item["output"] == "found" and item["error"] is None
    assert (item["server_label"], item["name"], item["arguments"]) == ("notes", "lookup", '{"q": 1}')
    (call,) = list(conversation)
    assert [m.role for m in conversation.messages("")] == ["assistant", "tool"]
    assert conversation.messages("")[1].text() == "found" and call.call_id == "call_a"


def test_a_failed_call_and_one_cut_while_it_ran():
    calls, events = make(offered())
    calls.piece(ToolCallDelta(0, "call_a", "lookup", "{}"))
    calls.tool_step(ToolRunning("call_a"))
    calls.tool_step(ToolResult("call_a", error={"type": "http_error", "code": 504, "message": "slow"}))
    calls.piece(ToolCallDelta(1, "call_b", "lookup", "{}"))
    calls.tool_step(ToolRunning("call_b"))
    calls.finish(False)
    failed = events.sent[events.types().index("response.mcp_call.failed") + 1].item
    assert failed["error"]["code"] == 504 and failed["output"] is None
    cut = events.sent[-1].item
    assert cut["status"] == "incomplete" and cut["output"] is None


def test_a_call_needing_approval_is_an_approval_request_and_its_answer_is_told():
    conversation = Conversation()
    calls, events = make(offered(approval=True), conversation)
    calls.piece(ToolCallDelta(0, "call_a", "lookup", "{}"))
    calls.finish(True)
    assert events.types() == ["response.output_item.added", "response.output_item.done"]
    (request,) = list(conversation)
    assert request.wire()["type"] == "mcp_approval_request" and request.wire()["server_label"] == "notes"
    assert conversation.messages("") == []  # unanswered: the LLM is not told of it yet
    conversation.add(
        Item("user", False, type="mcp_approval_response", approval_request_id=request.id, approve=False)
    )
    assert [m.text() for m in conversation.messages("")] == ["", DENIED]
    with pytest.raises(InvalidMessage):
        conversation.approval_request(request.id)  # answered once
    with pytest.raises(ItemNotFound):
        conversation.approval_request("item_nope")


def test_an_approved_call_is_an_mcp_call_naming_its_request():
    calls, events = make(offered(approval=True, approval_of={"call_a": "item_req"}))
    calls.piece(ToolCallDelta(0, "call_a", "lookup", "{}"))
    assert (
        events.sent[0].item["type"] == "mcp_call" and events.sent[0].item["approval_request_id"] == "item_req"
    )


async def test_urls_refused_and_tools_offered_by_allowed_tools():
    mcp = SessionMcp(
        Conversation(), Recorder().put, WorkUnits(lambda n, e: None), allow_private=False, timeout_s=1
    )
    local = SERVER.model_copy(update={"server_url": "http://127.0.0.1:9/mcp"})
    with pytest.raises(InvalidMessage) as err:
        await mcp.check([FunctionTool(name="f"), local], "session.tools")
    assert err.value.details["param"] == "session.tools.1.server_url"
    listed = [McpToolInfo("a", "", {}), McpToolInfo("b", "", {})]
    mcp._listed[("notes", SERVER.server_url, "")] = listed  # as a listing leaves it
    only_a = SERVER.model_copy(update={"allowed_tools": ["a"]})
    assert list(mcp.tools_for([only_a]).offered) == ["a"]
    assert list(mcp.tools_for([SERVER]).offered) == ["a", "b"]


def test_an_async_function_call_is_closed_at_once_and_the_llm_told_it_runs():
    tools = ResponseTools(async_functions=frozenset({"weather"}))
    tools.said.set()
    assert tools.runs("weather") and not tools.needs_approval("weather") and not tools.runs("other")
    result = tools.call(ServerCall("call_w", "weather", "{}"), threading.Event())
    assert result == ToolResult("call_w", output=ASYNC_PENDING)
    conversation = Conversation()
    calls, events = make(tools, conversation)
    calls.piece(ToolCallDelta(0, "call_w", "weather", "{}"))
    calls.tool_step(ToolRunning("call_w"))
    calls.tool_step(result)
    assert events.types() == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    (call,) = list(conversation)
    assert call.run_async and call.status == "completed" and "output" not in call.wire()
    assert conversation.messages("", tools=True) == []  # no output yet: the LLM is not told of it


def test_no_call_runs_before_its_response_is_said_and_a_dropped_one_never():
    tools = ResponseTools(async_functions=frozenset({"weather"}))
    results: list[ToolResult] = []
    worker = threading.Thread(
        target=lambda: results.append(tools.call(ServerCall("c", "weather", "{}"), stop))
    )
    stop = threading.Event()
    worker.start()
    worker.join(0.3)
    assert worker.is_alive() and not results  # held: it waits
    tools.said.set()
    worker.join(5)
    assert results == [ToolResult("c", output=ASYNC_PENDING)]
    dropped = ResponseTools(async_functions=frozenset({"weather"}))
    stop.set()
    assert dropped.call(ServerCall("d", "weather", "{}"), stop).error["code"] == 499
