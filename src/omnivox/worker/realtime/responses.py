"""The responses of one realtime session: the agent's replies (``agent.replies``), planned from
``response.create`` and the conversation, and each worded as its client sees it.

- ``create``: a response now (``response.create``, the end of a turn, the idle prompt); refused with
  ``conversation_already_has_active_response`` while one is speaking. ``speculate``, ``confirm``
  and ``discard_speculation``: the reply prepared during the user's pause.
- ``pause``/``resume``/``interrupt``, ``cancel`` (``response.cancel``), ``truncate``
  (``conversation.item.truncate``) and ``cut_playback`` (``output_audio_buffer.clear``) act on the
  replies; what the user heard of them is the playout ledger's.
- Each reply's events go to its ``Response`` (``worker.realtime.response``), which words them as
  ``response.*`` events and output items.

When a response that was heard ends, ``on_finished`` gets its reply (the session reports its
figures and arms the idle timer).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from omnivox.agent.events import ReplyCut, ReplyEnded, ReplyEvent, ReplyState
from omnivox.agent.playout import Playout
from omnivox.agent.replies import Replies
from omnivox.agent.reply import LeadPacing, Reply, ReplyPlan
from omnivox.connection.units import WorkUnits
from omnivox.core.ids import new_id
from omnivox.engines.base import Engine, VoiceProfile
from omnivox.protocol.chat import ChatMessage
from omnivox.protocol.realtime import wire as rt
from omnivox.protocol.realtime.session_config import SessionConfig, chat_tool_choice, check_tools
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import trim_history
from omnivox.voice.reply import ReplyRequest
from omnivox.worker.realtime.audio_io import OutputEncoder
from omnivox.worker.realtime.conversation import Conversation, Item, item_text
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.response import Response
from omnivox.worker.realtime.response_wire import ResponsePlan

KEEP_ENDED = 2  # ended responses kept worded: a barge-in may still cut the last one's playback


class Responses:
    def __init__(
        self,
        *,
        engine: Engine,
        profile: VoiceProfile,
        events: Events,
        conversation: Conversation,
        units: WorkUnits,
        executor: Executor,
        lead_ms: float,
        apology: str = "",
        config: Callable[[], SessionConfig],
        encoder: Callable[[], OutputEncoder],
        on_finished: Callable[[Reply], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        playout: Playout | None = None,
    ) -> None:
        self.profile = profile
        self.events = events
        self.conversation = conversation
        self.apology = apology  # said when a reply cannot be made
        self.config = config
        self.encoder = encoder
        self.playout = playout if playout is not None else Playout(clock)  # what the user heard
        self.replies = Replies(
            produce=engine.reply,
            emit=self._on_event,
            playout=self.playout,
            units=units,
            executor=executor,
            pacing=LeadPacing(lead_ms),
            on_finished=on_finished,
            drop_unsent=events.drop_audio,
            clock=clock,
        )
        self._worded: dict[str, Response] = {}  # reply id -> its response, while it runs
        self._ended: OrderedDict[str, Response] = OrderedDict()  # the last few that ended

    # ---- the replies

    @property
    def active(self) -> Reply | None:
        return self.replies.active

    @property
    def held(self) -> Reply | None:
        return self.replies.held

    @property
    def last(self) -> Reply | None:
        return self.replies.last

    def speaking(self) -> bool:
        return self.replies.speaking()

    def playback_left_s(self) -> float:
        return self.replies.playback_left_s()

    def spoken_recently(self) -> str:
        return self.replies.spoken_recently()

    def response(self, reply: Reply) -> Response | None:
        """How ``reply`` is worded (None once it is long over)."""
        return self._worded.get(reply.reply_id) or self._ended.get(reply.reply_id)

    # ---- starting

    async def create(
        self,
        params: rt.ResponseParams | None,
        *,
        speech_end_at: float | None = None,
        extra: list[ChatMessage] | None = None,
    ) -> Reply:
        """Start a response; raises ``ActiveResponse`` while one runs."""
        asked = params or rt.ResponseParams()
        return await self.replies.create(lambda: self._word(self._plan(asked, extra or []), speech_end_at))

    async def speculate(self, user_text: str) -> None:
        """Prepare (and hold) the reply to ``user_text`` while the user's pause runs out."""
        tentative = ChatMessage(role="user", content=user_text)
        await self.replies.speculate(
            lambda: self._word(self._plan(rt.ResponseParams(), [tentative]), None), user_text
        )

    async def confirm(self, user_item: Item, speech_end_at: float | None) -> bool:
        """The turn ended: say the held reply if it answers ``user_item``'s words (False: it did
        not, and it is dropped unheard)."""
        return await self.replies.confirm(user_item.text, speech_end_at)

    async def discard_speculation(self) -> None:
        await self.replies.discard_speculation()

    # ---- stopping

    def cancel(self, response_id: str | None) -> None:
        """``response.cancel``: raises ``ResponseCancelNotActive`` if there is nothing to cancel."""
        self.replies.cancel(response_id)

    def interrupt(self, reason: str) -> None:
        """Barge-in: cancel the running response, or cut the audio of the last one still playing."""
        self.replies.interrupt(reason)

    def truncate(self, item: Item, heard_ms: float) -> None:
        """A client's ``conversation.item.truncate``: the reply the item holds stops at ``heard_ms``
        (at once, if it is still being said) and the item keeps only what was heard."""
        if item.playback is not None and self.replies.truncate(item.playback, heard_ms):
            return  # its events end with the truncation
        self.conversation.truncate(item, heard_ms)

    def cut_playback(self) -> None:
        """Barge-in after a response finished but while its audio still plays: keep what was heard."""
        self.replies.cut_playback()

    def pause(self) -> bool:
        """Speech over the assistant: stop its audio now, undoably (False: nothing was playing)."""
        return self.replies.pause()

    def resume(self, reason: str) -> None:
        """The speech was not an interruption (``no_words``, ``backchannel``, ``echo``): play on."""
        self.replies.resume(reason)

    # ---- wording

    def _word(self, plan: ResponsePlan, speech_end_at: float | None) -> ReplyPlan:
        """The response ``plan`` is worded as it goes; the agent's reply is its request."""
        self._worded[plan.response_id] = Response(plan, self.events, self.conversation, self.encoder())
        return ReplyPlan(plan.request, plan.response_id, speech_end_at)

    def _on_event(self, event: ReplyEvent) -> None:
        if isinstance(event, ReplyCut):
            cut = self._worded.get(event.reply_id) or self._ended.get(event.reply_id)
            if cut is not None:
                self.conversation.truncate(cut.plan.item, event.stopped_ms)
            return
        response = self._worded.get(event.reply_id)
        if response is None:
            return
        response.on_event(event)
        if isinstance(event, ReplyEnded):
            del self._worded[event.reply_id]
            if event.state is not ReplyState.DISCARDED:
                self._ended[event.reply_id] = response
                while len(self._ended) > KEEP_ENDED:
                    self._ended.popitem(last=False)

    def _plan(self, params: rt.ResponseParams, extra: list[ChatMessage]) -> ResponsePlan:
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
        can_call = profile.tool_calls and bool(tools)
        if params.input is not None:
            history = [ChatMessage(role="system", content=instructions)] if instructions else []
            history += [ChatMessage(role=i.role or "user", content=item_text(i)) for i in params.input]
        else:
            history = self.conversation.messages(instructions, tools=profile.tool_calls)
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
            tools=tuple(t.chat_tool() for t in tools) if can_call else (),
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
        )
        return ResponsePlan(
            response_id=new_id("resp"),
            item=item,
            request=request,
            in_conversation=in_conversation,
            metadata=params.metadata,
            context_tokens=profile.context_tokens,
        )
