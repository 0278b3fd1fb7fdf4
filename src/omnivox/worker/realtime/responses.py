"""The responses of one realtime session: at most one speaking, at most one held, each a work unit.

- ``create``: a response now (``response.create``, the end of a turn, the idle prompt); refused with
  ``conversation_already_has_active_response`` while one is speaking.
- ``speculate``: prepare the reply to what the user said so far, held during their pause;
  ``confirm`` releases it when the turn ends with the same words (else it is dropped unheard);
  ``discard_speculation`` drops it when they go on talking.
- ``pause`` (speech over the assistant, not judged yet) stops the speaking response's audio, or the
  playback of the last one still playing at the client; ``resume`` plays it on.
- ``interrupt`` (a barge-in) cancels the speaking response, or cuts the audio of the last one that
  is still playing at the client; ``cancel`` is the client's ``response.cancel``.
- What the user heard of them is the playout ledger's (``agent.playout``): the speaking response,
  or the last one heard, holds the floor there.

When a response that was heard ends, ``on_finished`` gets it (the session reports its figures and
arms the idle timer).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from omnivox.agent.playout import Playout
from omnivox.connection.units import WorkUnits
from omnivox.core.errors import ActiveResponse, ResponseCancelNotActive
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
from omnivox.worker.realtime.response import Response, ResponsePlan, ResponseState

log = logging.getLogger(__name__)

UNIT = "response"


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
        on_finished: Callable[[Response], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        playout: Playout | None = None,
    ) -> None:
        self.engine = engine
        self.playout = playout if playout is not None else Playout(clock)  # what the user heard
        self.profile = profile
        self.events = events
        self.conversation = conversation
        self.units = units
        self.executor = executor
        self.lead_ms = lead_ms
        self.apology = apology  # said when a reply cannot be made
        self.config = config
        self.encoder = encoder
        self.on_finished = on_finished
        self.clock = clock
        self.active: Response | None = None  # speaking
        self.held: Response | None = None  # prepared during the user's pause, not said yet
        self.last: Response | None = None  # the last one that was heard (its audio may still play)
        self._held_text = ""
        self._paused: Response | None = None  # paused by speech over it, not judged yet

    # ---- what turn-taking needs to know

    def speaking(self) -> bool:
        """Whether the assistant is talking: a response runs, or its audio is still playing."""
        return self.active is not None or self.playback_left_s() > 0

    def playback_left_s(self) -> float:
        """Seconds of the last finished response's audio the client has yet to play."""
        return 0.0 if self.active is not None else self.playout.left_s()

    # ---- starting

    async def create(
        self,
        params: rt.ResponseParams | None,
        *,
        speech_end_at: float | None = None,
        extra: list[ChatMessage] | None = None,
    ) -> Response:
        """Start a response; raises ``ActiveResponse`` while one runs."""
        if self.active is not None and self.active.over:  # cut a moment ago: let it finish its events
            await asyncio.wait_for(self.active.ended.wait(), 10)
        if self.active is not None:
            raise ActiveResponse(
                f"response {self.active.response_id} is in progress; cancel it or wait for response.done"
            )
        await self.discard_speculation()
        plan = self._plan(params or rt.ResponseParams(), speech_end_at, extra or [])
        response = self._response(plan, held=False)
        self._speak(response)
        await self.units.start(UNIT, self._run(response))
        return response

    async def speculate(self, user_text: str) -> None:
        """Prepare (and hold) the reply to ``user_text`` while the user's pause runs out."""
        await self.discard_speculation()
        tentative = ChatMessage(role="user", content=user_text)
        plan = self._plan(rt.ResponseParams(), None, [tentative])
        self.held, self._held_text = self._response(plan, held=True), user_text
        await self.units.start(UNIT, self._run(self.held))

    async def confirm(self, user_item: Item, speech_end_at: float | None) -> bool:
        """The turn ended: say the held reply if it answers ``user_item``'s words (False: it did
        not, and it is dropped unheard)."""
        held, self.held = self.held, None
        if held is None:
            return False
        if self._held_text != user_item.text:
            held.discard()
            await self.units.cancel(UNIT)
            return False
        self._speak(held)
        held.release(speech_end_at)
        return True

    async def discard_speculation(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            held.discard()
            await self.units.cancel(UNIT)

    # ---- stopping

    def cancel(self, response_id: str | None) -> None:
        """``response.cancel``: raises ``ResponseCancelNotActive`` if there is nothing to cancel."""
        active = self.active
        if active is None or (response_id is not None and response_id != active.response_id):
            raise ResponseCancelNotActive(
                "no response is in progress"
                if active is None
                else f"response {response_id} is not in progress",
                param="response_id" if response_id else None,
            )
        active.cancel("client_cancelled")

    def interrupt(self, reason: str) -> None:
        """Barge-in: cancel the running response, or cut the audio of the last one still playing."""
        self._paused = None
        if self.active is not None:
            self.active.cancel(reason)
        else:
            self.cut_playback()

    def truncate(self, item: Item, heard_ms: float) -> None:
        """A client's ``conversation.item.truncate``: the reply the item holds stops at ``heard_ms``
        (at once, if it is still being said) and the item keeps only what was heard."""
        active, last = self.active, self.last
        if active is not None and active.plan.item is item and item.status == "in_progress":
            active.cancel("client_cancelled", heard_ms)  # its events end with the truncation
            return
        if last is not None and last.plan.item is item:
            last.playback.stop(heard_ms)  # what still played at the client is not echo any more
            self.playout.forget(last.playback)
            self.last = None
        self.conversation.truncate(item, heard_ms)

    def cut_playback(self) -> None:
        """Barge-in after a response finished but while its audio still plays: keep what was heard."""
        last = self.last
        if last is None or not last.plan.audio or last.plan.item.audio_ms <= 0:
            return  # nothing of it was said (a reply that only called functions has no audio)
        self.conversation.truncate(last.plan.item, last.playback.stop())
        self.playout.forget(last.playback)
        self.last = None

    def pause(self) -> bool:
        """Speech over the assistant: stop its audio now, undoably (False: nothing was playing)."""
        target = self.active if self.active is not None else self.last
        if target is None or not target.pause():
            return False
        self._paused = target
        return True

    def resume(self, reason: str) -> None:
        """The speech was not an interruption (``no_words``, ``backchannel``, ``echo``): play on."""
        paused, self._paused = self._paused, None
        if paused is not None:
            paused.resume(reason)

    def spoken_recently(self) -> str:
        """The assistant's words the user may just have heard (the echo guard's)."""
        return self.playout.spoken_recently()

    # ---- internals

    def _speak(self, response: Response) -> None:
        """``response`` speaks: it has the floor, in the ledger too."""
        self.active = response
        self.playout.hold(response.playback)

    def _response(self, plan: ResponsePlan, held: bool) -> Response:
        return Response(
            plan,
            self.engine.reply,
            self.events,
            self.conversation,
            self.encoder(),
            self.executor,
            self.lead_ms,
            held=held,
            clock=self.clock,
            playback=self.playout.playback(),
        )

    async def _run(self, response: Response) -> None:
        try:
            state = await response.run()
        finally:
            if self.active is response:
                self.active = None
        if state is ResponseState.DISCARDED:
            return  # a held reply the user never heard: it leaves no trace
        self.last = response
        if (error := response.figures.error) is not None:
            said = "failed" if state is ResponseState.FAILED else "could not be made (apologised)"
            log.warning("response %s %s: %s", response.response_id, said, error.message)
        await self.on_finished(response)

    def _plan(
        self,
        params: rt.ResponseParams,
        speech_end_at: float | None,
        extra: list[ChatMessage],
    ) -> ResponsePlan:
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
            speech_end_at=speech_end_at,
            context_tokens=profile.context_tokens,
        )
