"""A reply that runs the server's own tools between LLM rounds (``voice.tool_rounds``).

The LLM here is a scripted function of the messages (as the fake OpenAI service is): offered
tools, it calls ``lookup``; given a tool result, it says it. The server's tools are a recording
``ServerTools`` whose calls return at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams, ToolCallDelta
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest, Word
from omnivox.voice.tool_calls import ServerCall, ToolResult, ToolRunning
from omnivox.voice.tool_rounds import MAX_ROUNDS, reply_with_server_tools


@dataclass
class Tools:
    approval: set[str] = field(default_factory=set)
    server: set[str] = field(default_factory=lambda: {"lookup"})
    first: tuple[ServerCall, ...] = ()
    ran: list[ServerCall] = field(default_factory=list)
    fail: bool = False

    def runs(self, name: str) -> bool:
        return name in self.server

    def needs_approval(self, name: str) -> bool:
        return name in self.approval

    def approved(self) -> tuple[ServerCall, ...]:
        return self.first

    def call(self, call: ServerCall, stop: threading.Event) -> ToolResult:
        self.ran.append(call)
        if self.fail:
            return ToolResult(call.call_id, error={"type": "http_error", "code": 504, "message": "too slow"})
        return ToolResult(call.call_id, output=f"result of {call.name}")


def scripted(calls: tuple[str, ...] = ("lookup",), always: bool = False):
    asked: list[list[ChatMessage]] = []

    def produce(request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        asked.append(list(request.messages))
        yield FirstToken(0.1)
        last = request.messages[-1]
        if last.role == "tool" and not always:
            yield Word(f"It says {last.text()}.")
            return
        for n, name in enumerate(calls):
            yield ToolCallDelta(n, None, name)  # no call id: the rounds give one
            yield ToolCallDelta(n, arguments='{"q": 1}')

    return produce, asked


def request(tools: Tools) -> ReplyRequest:
    return ReplyRequest(
        [ChatMessage(role="user", content="hi")], LlmParams(), speak=False, server_tools=tools
    )


def test_a_server_call_runs_and_the_llm_answers_with_its_result_in_the_same_reply():
    tools = Tools()
    produce, asked = scripted()
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    calls = [p for p in pieces if isinstance(p, ToolCallDelta)]
    call_id = calls[0].call_id
    assert call_id and all(c.call_id == call_id and c.index == 0 for c in calls)
    steps = [p for p in pieces if isinstance(p, ToolRunning | ToolResult)]
    assert steps == [ToolRunning(call_id), ToolResult(call_id, output="result of lookup")]
    assert [p for p in pieces if isinstance(p, Word)] == [Word("It says result of lookup.")]
    assert sum(isinstance(p, FirstToken) for p in pieces) == 1  # the reply's first token only
    assistant, tool = asked[1][-2:]
    assert assistant.tool_calls[0].id == tool.tool_call_id == call_id
    assert tools.ran == [ServerCall(call_id, "lookup", '{"q": 1}')]


def test_a_failed_call_is_told_to_the_llm():
    tools = Tools(fail=True)
    produce, asked = scripted()
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    assert asked[1][-1].text() == "error: the tool call failed (too slow)"
    assert [p.text for p in pieces if isinstance(p, Word)] == [
        "It says error: the tool call failed (too slow)."
    ]


def test_a_call_that_needs_approval_ends_the_reply_unrun():
    tools = Tools(approval={"lookup"})
    produce, asked = scripted()
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    assert tools.ran == [] and len(asked) == 1
    assert not any(isinstance(p, ToolRunning | ToolResult | Word) for p in pieces)


def test_a_client_function_in_the_round_ends_the_reply_after_the_server_calls_run():
    tools = Tools()
    produce, asked = scripted(calls=("lookup", "client_fn"))
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    assert [c.name for c in tools.ran] == ["lookup"] and len(asked) == 1
    assert sorted({p.index for p in pieces if isinstance(p, ToolCallDelta)}) == [0, 1]


def test_approved_calls_run_first_numbered_before_the_llm_calls():
    approved = ServerCall("call_ok", "lookup", "{}")
    tools = Tools(first=(approved,))
    produce, asked = scripted()
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    assert pieces[0] == ToolCallDelta(0, "call_ok", "lookup", "{}")
    assert tools.ran == [approved]
    assert asked[0][-1].role == "tool" and asked[0][-1].tool_call_id == "call_ok"
    assert [p.text for p in pieces if isinstance(p, Word)] == ["It says result of lookup."]


def test_a_model_that_keeps_calling_is_stopped_after_the_last_round():
    tools = Tools()
    produce, asked = scripted(always=True)
    pieces = list(reply_with_server_tools(produce, request(tools), threading.Event()))
    assert len(asked) == MAX_ROUNDS and len(tools.ran) == MAX_ROUNDS
    indices = sorted({p.index for p in pieces if isinstance(p, ToolCallDelta)})
    assert indices == list(range(MAX_ROUNDS))  # each round's call is an item of its own


def test_a_stopped_reply_runs_nothing_more():
    tools = Tools()
    produce, asked = scripted()
    stop = threading.Event()
    pieces = []
    for piece in reply_with_server_tools(produce, request(tools), stop):
        pieces.append(piece)
        if isinstance(piece, ToolCallDelta):
            stop.set()
    assert tools.ran == [] and len(asked) == 1


def test_without_server_tools_the_reply_is_the_models():
    produce, _ = scripted()
    req = ReplyRequest([ChatMessage(role="user", content="hi")], LlmParams(), speak=False)
    pieces = list(reply_with_server_tools(produce, req, threading.Event()))
    assert pieces[1] == ToolCallDelta(0, None, "lookup")  # untouched
