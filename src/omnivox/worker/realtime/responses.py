"""The responses of one realtime session: planned from ``response.create`` and the conversation,
and each worded as its client sees it. The replies themselves are the agent's (``agent.replies``).

- ``plan``: what the agent is asked to say (``response.create``'s parameters, or the defaults when
  the agent answers a turn itself), as a ``ResponsePlan`` (the response's id, its assistant item,
  the request to the voice models); the agent's ``ReplyPlan`` carries the same id.
- ``on_event``: each reply's events go to its ``Response`` (``worker.realtime.response``), which
  words them as ``response.*`` events and output items; a cut playback truncates its item.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from omnivox.agent.events import ReplyCut, ReplyEnded, ReplyEvent, ReplyPaused, ReplyResumed, ReplyState
from omnivox.agent.reply import ReplyPlan
from omnivox.core.ids import new_id
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.realtime.session_config import (
    FunctionTool,
    SessionConfig,
    Tool,
    chat_tool_choice,
    check_tools,
)
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import trim_history
from omnivox.voice.models import VoiceProfile
from omnivox.voice.reply import ReplyRequest
from omnivox.worker.realtime.async_outputs import AsyncOutputs
from omnivox.worker.realtime.audio_io import OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item, item_text
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.mcp import McpOffer, SessionMcp
from omnivox.worker.realtime.response import Response
from omnivox.worker.realtime.response_wire import ResponsePlan
from omnivox.worker.realtime.server_tools import ResponseTools

KEEP_ENDED = 2  # ended responses kept worded: a barge-in may still cut the last one's playback


class Responses:
    def __init__(
        self,
        *,
        profile: VoiceProfile,
        events: Events,
        conversation: Conversation,
        config: Callable[[], SessionConfig],
        encoder: Callable[[], OutputEncoder],
        apology: str = "",
        mcp: SessionMcp | None = None,
    ) -> None:
        self.profile = profile
        self.events = events
        self.conversation = conversation
        self.config = config
        self.encoder = encoder
        self.apology = apology  # said when a reply cannot be made
        self.mcp = mcp  # the session's MCP servers
        self.async_outputs: AsyncOutputs | None = None  # outputs of calls no response has read yet
        self._worded: dict[str, Response] = {}  # reply id -> its response, while it runs
        self._ended: OrderedDict[str, Response] = OrderedDict()  # the last few that ended

    def plan(self, params: rt.ResponseParams | None, extra: list[ChatMessage]) -> ReplyPlan:
        """The reply to ``params`` (None: the session's defaults), worded as it goes."""
        plan = self._response_plan(params or rt.ResponseParams(), extra)
        if plan.in_conversation and self.async_outputs is not None:
            self.async_outputs.taken()  # this response reads them
        self._worded[plan.response_id] = Response(plan, self.events, self.conversation, self.encoder())
        return ReplyPlan(plan.request, plan.response_id)

    def prompt(self, extra: list[ChatMessage]) -> ReplyRequest:
        """The request the session's next reply would make with ``extra`` after the conversation
        (nothing is worded: the agent prefills its prompt while the user speaks)."""
        return self._response_plan(rt.ResponseParams(), extra).request

    def worded(self, reply_id: str) -> Response | None:
        """The response a reply is (None: no such reply, or long over)."""
        return self._worded.get(reply_id) or self._ended.get(reply_id)

    def on_event(self, event: ReplyEvent) -> None:
        """Word one of the agent's reply events."""
        if isinstance(event, ReplyCut):
            cut = self.worded(event.reply_id)
            if cut is not None:
                self.conversation.truncate(cut.plan.item, event.stopped_ms)
            return
        response = self._worded.get(event.reply_id)
        if response is None:
            # a reply that has said all it had still plays at the listener: its playback's pause
            # and resume are the player's to hear (it stops at once on a barge-in at the reply's end)
            ended = self._ended.get(event.reply_id)
            if ended is not None and isinstance(event, ReplyPaused | ReplyResumed):
                ended.on_event(event)
            return
        response.on_event(event)
        if isinstance(event, ReplyEnded):
            del self._worded[event.reply_id]
            if event.state is not ReplyState.DISCARDED:
                self._ended[event.reply_id] = response
                while len(self._ended) > KEEP_ENDED:
                    self._ended.popitem(last=False)

    def _response_plan(self, params: rt.ResponseParams, extra: list[ChatMessage]) -> ResponsePlan:
        config, profile = self.config(), self.profile
        modalities = params.output_modalities or params.modalities or config.output_modalities
        voice = profile.resolve_voice(
            (params.audio or {}).get("output", {}).get("voice") or params.voice or config.audio.output.voice
        )
        instructions = params.instructions if params.instructions is not None else config.instructions
        in_conversation = params.conversation in (None, "auto")
        tools, choice, parallel = check_tools(
            config, params.tools, params.tool_choice, params.parallel_tool_calls
        )
        server_tools = self._server_tools(tools, config) if profile.tool_calls else None
        chat_tools = [t.chat_tool() for t in tools if isinstance(t, FunctionTool)]
        if server_tools is not None:
            chat_tools += [t.chat_tool() for t in server_tools.mcp.offered.values()]
        can_call = profile.tool_calls and bool(chat_tools)
        if params.input is not None:
            history = [ChatMessage(role="system", content=instructions)] if instructions else []
            history += [ChatMessage(role=i.role or "user", content=item_text(i)) for i in params.input]
        else:
            history = self.conversation.messages(
                instructions, tools=profile.tool_calls, vision=profile.vision
            )
        history += extra
        limit = params.max_output_tokens or params.max_response_output_tokens or config.max_output_tokens
        cap = profile.max_reply_tokens
        max_tokens = cap if limit == "inf" else min(int(limit), cap)
        messages = trim_history(history, profile.context_tokens, reserve_tokens=max_tokens)
        audio = "audio" in modalities
        item = Item(role="assistant", audio=audio, status="in_progress")
        llm = LlmParams(
            temperature=profile.temperature.for_history(messages),
            max_tokens=max_tokens,
            tools=tuple(chat_tools) if can_call else (),
            tool_choice=chat_tool_choice(choice) if can_call else None,
            parallel_tool_calls=parallel if can_call else None,
        )
        request = ReplyRequest(
            messages=messages,
            llm=llm,
            speak=audio,
            voice=voice,
            speed=config.audio.output.speed,
            apology=self.apology,
            server_tools=server_tools,
        )
        return ResponsePlan(
            response_id=new_id("resp"),
            item=item,
            request=request,
            in_conversation=in_conversation,
            metadata=params.metadata,
            context_tokens=profile.context_tokens,
            tools=server_tools,
        )

    def _server_tools(self, tools: list[Tool], config: SessionConfig) -> ResponseTools | None:
        """The calls a response's reply handles itself: MCP tools (a function tool of the same name
        is the client's), asynchronous functions (None: neither, and no approved call waits)."""
        functions = [t for t in tools if isinstance(t, FunctionTool)]
        named = {t.name for t in functions}
        offer = self.mcp.tools_for(tools) if self.mcp is not None else McpOffer()
        offer = replace(offer, offered={n: t for n, t in offer.offered.items() if n not in named})
        every = config.omnivox.async_function_calls
        asynchronous = frozenset(t.name for t in functions if every or t.run_async)
        timeout_s = self.mcp.timeout_s if self.mcp is not None else 0.0
        return ResponseTools(offer, timeout_s, asynchronous) or None
