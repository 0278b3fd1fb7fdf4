"""A reply that runs the server's own tools (MCP) between LLM rounds, within one reply.

With ``request.server_tools`` a reply goes: the calls the client approved since the last reply
(run first), then the LLM; when the LLM calls tools the server runs, they are run (``ToolRunning``,
``ToolResult``) and the LLM is asked again with their results, so the answer that uses them is
spoken in the same reply, up to ``MAX_ROUNDS`` rounds. A round stops the reply instead when it also
calls a function the client runs, or a tool that waits for the client's approval (the runnable ones
are still run: their items keep the outputs). A failed call is told to the LLM as an error, which
it can say; nothing waits without a bound (each call has its timeout, a barge-in abandons it).

The calls of all rounds are numbered once (``ToolCallDelta.index``) and each has its ``call_id``
from its first piece on, so the adapter words each as one item.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace

from omnivox.core.ids import new_id
from omnivox.protocol.chat import ChatMessage, ToolCall
from omnivox.voice.listener import Listener
from omnivox.voice.llm.base import ToolCallDelta
from omnivox.voice.models import VoiceModels, VoiceProfile
from omnivox.voice.reply import FirstToken, ReplyPiece, ReplyRequest
from omnivox.voice.tool_calls import ServerCall, ServerTools, ToolResult, ToolRunning
from omnivox.voice.vad.turn import TurnParams

MAX_ROUNDS = 4  # LLM rounds in one reply (a model that keeps calling is stopped there)

Produce = Callable[[ReplyRequest, threading.Event], Iterator[ReplyPiece]]


def reply_with_server_tools(
    produce: Produce, request: ReplyRequest, stop: threading.Event
) -> Iterator[ReplyPiece]:
    """``produce``'s reply to ``request``, with the tools the server runs run in it (see above)."""
    tools = request.server_tools
    if tools is None:
        yield from produce(request, stop)
        return
    messages = list(request.messages)
    approved = list(tools.approved())
    for k, call in enumerate(approved):
        yield ToolCallDelta(k, call.call_id, call.name, call.arguments)
    numbered = len(approved)  # calls of this reply so far
    if approved:
        results = yield from _run(tools, approved, stop)
        messages += _told(approved, results)
    for n in range(MAX_ROUNDS):
        if stop.is_set():
            return
        calls = yield from _llm_round(produce, replace(request, messages=messages), stop, numbered, n > 0)
        numbered += len(calls)
        server = [c for c in calls if tools.runs(c.name)]
        runnable = [c for c in server if not tools.needs_approval(c.name)]
        results = yield from _run(tools, runnable, stop)
        if not runnable or len(runnable) < len(calls):  # done, or the client has its part to do first
            return
        messages += _told(runnable, results)


def _llm_round(
    produce: Produce, request: ReplyRequest, stop: threading.Event, numbered: int, later: bool
) -> Generator[ReplyPiece, None, list[ServerCall]]:
    """One LLM round's pieces (its calls renumbered after ``numbered``); returns its calls."""
    calls: dict[int, list[str]] = {}  # the LLM's index -> [call_id, name, arguments]
    for piece in produce(request, stop):
        if isinstance(piece, FirstToken) and later:
            continue  # the reply's first token came in its first round
        if isinstance(piece, ToolCallDelta):
            entry = calls.get(piece.index)
            if entry is None:
                entry = calls[piece.index] = [piece.call_id or new_id("call"), "", ""]
            entry[1] = entry[1] or piece.name or ""
            entry[2] += piece.arguments
            piece = replace(piece, index=numbered + sorted(calls).index(piece.index), call_id=entry[0])
        yield piece
    return [ServerCall(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


def _run(
    tools: ServerTools, calls: list[ServerCall], stop: threading.Event
) -> Generator[ReplyPiece, None, list[ToolResult]]:
    results = []
    for call in calls:
        if stop.is_set():
            break
        yield ToolRunning(call.call_id)
        result = tools.call(call, stop)
        results.append(result)
        yield result
    return results


def _told(calls: list[ServerCall], results: list[ToolResult]) -> list[ChatMessage]:
    """The calls and their results as the LLM reads them in its next round."""
    made = [ToolCall(id=c.call_id, name=c.name, arguments=c.arguments) for c in calls[: len(results)]]
    if not made:
        return []
    out = [ChatMessage(role="assistant", content="", tool_calls=made)]
    out += [ChatMessage(role="tool", content=r.for_llm(), tool_call_id=r.call_id) for r in results]
    return out


class ServerToolVoice:
    """Voice models whose replies run the server's tools (``reply_with_server_tools``); hearing and
    the profile are the wrapped models'."""

    def __init__(self, voice: VoiceModels) -> None:
        self.voice = voice

    def profile(self) -> VoiceProfile:
        return self.voice.profile()

    def open_listener(
        self, params: TurnParams | None, confirm_ms: float, speculate_at: float | None = 0.3
    ) -> Listener:
        return self.voice.open_listener(params, confirm_ms, speculate_at)

    def reply(self, request: ReplyRequest, stop: threading.Event) -> Iterator[ReplyPiece]:
        return reply_with_server_tools(self.voice.reply, request, stop)
