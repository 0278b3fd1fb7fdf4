"""Responses of one realtime session: at most one at a time, each run as the ``response`` unit."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from omnivox.core.errors import ActiveResponse, ResponseCancelNotActive
from omnivox.core.ids import new_id
from omnivox.protocol import realtime as rt
from omnivox.protocol.chat import ChatMessage
from omnivox.voice.llm.base import LlmParams
from omnivox.voice.llm.history import trim_history
from omnivox.worker.realtime.conversation import Item
from omnivox.worker.realtime.responder import Responder, ResponsePlan

if TYPE_CHECKING:
    from omnivox.worker.realtime.session import RealtimeSession

log = logging.getLogger(__name__)


class Responses:
    def __init__(self, session: RealtimeSession) -> None:
        self.s = session
        self.active: Responder | None = None
        self.held: Responder | None = None  # prepared during the user's pause, not said yet
        self._held_text = ""

    def speaking(self) -> bool:
        """Whether the assistant is talking: a response runs, or its audio is still playing."""
        return self.active is not None or self.s.playback_until() > 0

    async def create(
        self,
        params: rt.ResponseParams | None,
        *,
        speech_end_at: float | None = None,
        extra: list[ChatMessage] | None = None,
    ) -> Responder:
        """Start a response; raises ``ActiveResponse`` while one runs."""
        if self.active is not None:
            raise ActiveResponse(
                f"response {self.active.response_id} is in progress; cancel it or wait for response.done"
            )
        await self.discard_speculation()
        await self.s.units.cancel("idle")
        plan = self._plan(params or rt.ResponseParams(), speech_end_at, extra or [])
        responder = self._responder(plan, held=False)
        self.active = responder
        await self.s.units.start("response", self._run(responder))
        return responder

    async def speculate(self, user_text: str) -> None:
        """Prepare (and hold) the reply to ``user_text`` while the user's pause runs out."""
        await self.discard_speculation()
        tentative = ChatMessage(role="user", content=user_text)
        plan = self._plan(rt.ResponseParams(), None, [tentative], add_item=False)
        self.held, self._held_text = self._responder(plan, held=True), user_text
        await self.s.units.start("response", self._run(self.held))

    async def confirm(self, user_item: Item, speech_end_at: float | None) -> bool:
        """The turn ended: say the held reply if it answers ``user_item``'s words (False: it did
        not, and it is dropped unheard)."""
        held, self.held = self.held, None
        if held is None:
            return False
        if self._held_text != user_item.text:
            held.discard()
            await self.s.units.cancel("response")
            return False
        await self.s.units.cancel("idle")
        previous = self.s.conversation.add(held.plan.item)
        self.active = held
        held.release(previous, speech_end_at)
        return True

    async def discard_speculation(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            held.discard()
            await self.s.units.cancel("response")

    def _responder(self, plan: ResponsePlan, held: bool) -> Responder:
        s = self.s
        return Responder(plan, s.stack, s.outbox, s.encoder, s.output_thread, s.lead_ms, held=held)

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
        if self.active is not None:
            self.active.cancel(reason)
        else:
            self.s.cut_playback()

    async def _run(self, responder: Responder) -> None:
        try:
            outcome = await responder.run()
        finally:
            if self.active is responder:
                self.active = None
        if outcome.status == "discarded":
            return  # a held reply the user never heard: it leaves no trace
        s = self.s
        s.last_response = responder
        if outcome.error is not None:
            log.warning("response %s failed: %s", responder.response_id, outcome.error.message)
            s.report(outcome.error)
        s.outbox.put(
            rt.InternalMetrics(
                voice_to_voice_s=outcome.voice_to_voice_s,
                llm_ttft_s=outcome.llm_ttft_s,
                tts_ttfa_s=outcome.tts_ttfa_s,
                interrupted=outcome.status == "cancelled",
                response_done=True,
                asr_busy_s=s.asr_busy_s,
                asr_audio_s=s.asr_audio_s,
                tts_busy_s=responder.tts_busy_s,
                tts_audio_s=responder.tts_audio_s,
            )
        )
        s.asr_busy_s = s.asr_audio_s = 0.0
        await s.turns.arm_idle(s.playback_until())

    def _plan(
        self,
        params: rt.ResponseParams,
        speech_end_at: float | None,
        extra: list[ChatMessage],
        add_item: bool = True,
    ) -> ResponsePlan:
        s = self.s
        config = s.config
        modalities = params.output_modalities or params.modalities or config.output_modalities
        audio = "audio" in modalities
        voice = s.stack.tts.resolve_voice(
            (params.audio or {}).get("output", {}).get("voice") or params.voice or config.audio.output.voice
        )
        instructions = params.instructions if params.instructions is not None else config.instructions
        in_conversation = params.conversation in (None, "auto")
        if params.input is not None:
            history = [ChatMessage(role="system", content=instructions)] if instructions else []
            history += [ChatMessage(role=i.role, content=s.item_text(i)) for i in params.input]
        else:
            history = s.conversation.messages(instructions)
        history += extra
        limit = params.max_output_tokens or params.max_response_output_tokens or config.max_output_tokens
        max_tokens = s.stack.max_reply_tokens if limit == "inf" else min(int(limit), s.stack.max_reply_tokens)
        messages = trim_history(history, s.stack.context_tokens, reserve_tokens=max_tokens)
        item = Item(role="assistant", audio=audio, status="in_progress")
        previous = s.conversation.add(item) if in_conversation and add_item else None
        return ResponsePlan(
            response_id=new_id("resp"),
            item=item,
            audio=audio,
            voice=voice,
            speed=config.audio.output.speed,
            messages=messages,
            llm=LlmParams(temperature=s.stack.temperature.for_history(messages), max_tokens=max_tokens),
            in_conversation=in_conversation,
            previous_item_id=previous,
            metadata=params.metadata,
            speech_end_at=speech_end_at,
        )
