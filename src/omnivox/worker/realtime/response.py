"""One realtime response as its client sees it: an agent reply worded as OpenAI events and items.

The reply itself (its state machine, pacing, the models on the output thread) is the agent's
(``agent.reply``); this maps the events it says (``agent.events``) to the response's wire events,
in order:

    response.created, rate_limits.updated                                  (ReplyStarted)
    response.output_item.added, conversation.item.added, content_part.added (the first word or sound)
    response.output_text.delta                                             (ReplyText: text replies)
    response.output_audio_transcript.delta                                 (ReplySentence)
    response.output_audio.delta                                            (ReplyAudio)
    response.function_call_arguments.delta ...                             (ReplyCall: ``calls``)
    response.mcp_call.in_progress, .completed | .failed                    (ReplyTool: ``calls``)
    omnivox.interruption.paused / .resumed                                 (ReplyPaused / ReplyResumed)
    conversation.item.truncated, ...done, content_part.done, output_item.done, response.done
                                                                           (ReplyEnded)

A response's output items open as they begin: the message (text or audio) at its first word, each
function call at its first piece; a response that only calls functions has no message item, one
that says nothing at all has an empty one. A cut audio reply's item keeps the words the user heard
(the playout ledger's ``Playback`` of it, which the item holds). Audio deltas are tagged with the
response's id, so unsent ones are dropped from the outbox when it is cut.
"""

from __future__ import annotations

from typing import Any

from omnivox.agent.events import (
    ReplyAudio,
    ReplyCall,
    ReplyEnded,
    ReplyEvent,
    ReplyFigures,
    ReplyPaused,
    ReplyResumed,
    ReplySentence,
    ReplyStarted,
    ReplyState,
    ReplyText,
    ReplyTool,
)
from omnivox.agent.playout import Playback
from omnivox.protocol.realtime import events as ev
from omnivox.worker.realtime.audio_io import OutputEncoder
from omnivox.worker.realtime.calls import ResponseCalls
from omnivox.worker.realtime.conversation import Conversation, Item
from omnivox.worker.realtime.events import Events
from omnivox.worker.realtime.response_wire import ResponsePlan, response_object
from omnivox.worker.realtime.usage import rate_limits

R = ReplyState
WIRE_STATUS = {R.DONE: "completed", R.CANCELLED: "cancelled", R.FAILED: "failed"}


class Response:
    def __init__(
        self, plan: ResponsePlan, events: Events, conversation: Conversation, encoder: OutputEncoder
    ) -> None:
        self.plan = plan
        self.events = events
        self.conversation = conversation
        self.encoder = encoder
        self.playback: Playback | None = None  # the ledger's record of its audio, once it speaks
        self.state: ReplyState | None = None  # how it ended
        self.figures = ReplyFigures()
        self._text: list[str] = []
        self._outputs: list[Item] = []  # output items in the order they opened
        self._message_index: int | None = None  # the message item's output index, once open
        self.calls = ResponseCalls(
            plan.response_id,
            events,
            conversation if plan.in_conversation else None,
            self._output_index,
            plan.tools,
        )

    @property
    def response_id(self) -> str:
        return self.plan.response_id

    def on_event(self, event: ReplyEvent) -> None:
        """Word one of the agent's reply events (on the event loop, as the reply says it)."""
        p = self.plan
        if isinstance(event, ReplyStarted):
            if p.tools is not None:
                p.tools.said.set()  # its calls may run now
            self.playback = event.playback
            if p.audio:
                p.item.playback = event.playback  # the item's words are what of it was heard
            p.item.status = "in_progress"
            self.events.put(ev.ResponseCreated(response=self._response("in_progress")))
            self.events.put(rate_limits(p.request, p.context_tokens))
        elif isinstance(event, ReplyText):
            if not p.audio and (event.text.strip() or self._message_index is not None):
                self._open_message()
                self._text.append(event.text)
                self.events.put(ev.TextDelta(delta=event.text, **self._where()))
        elif isinstance(event, ReplySentence):
            self._open_message()
            delta = event.text if event.index == 0 else " " + event.text
            self.events.put(ev.AudioTranscriptDelta(delta=delta, **self._where()))
        elif isinstance(event, ReplyAudio):
            self._open_message()
            frame = ev.AudioDelta(delta=self.encoder.encode(event.audio), **self._where())
            self.events.put(frame, response_id=self.response_id, audio_ms=event.ms)
        elif isinstance(event, ReplyCall):
            self.calls.piece(event.call)
        elif isinstance(event, ReplyTool):
            self.calls.tool_step(event.step)
        elif isinstance(event, ReplyPaused):
            self.events.put(
                ev.InterruptionPaused(
                    response_id=self.response_id, item_id=p.item.id, audio_end_ms=int(event.at_ms)
                )
            )
        elif isinstance(event, ReplyResumed):
            self.events.put(
                ev.InterruptionResumed(
                    response_id=self.response_id,
                    item_id=p.item.id,
                    audio_start_ms=int(event.at_ms),
                    reason=event.reason,
                )
            )
        elif isinstance(event, ReplyEnded):
            self.state, self.figures = event.state, event.figures
            if event.state is not R.DISCARDED:  # a held reply the user never heard: no trace
                self._finish(event)

    # ---- items

    def _where(self) -> dict[str, Any]:
        """The message item's place (for its content events)."""
        return {
            "response_id": self.plan.response_id,
            "item_id": self.plan.item.id,
            "output_index": self._message_index or 0,
        }

    def _output_index(self, item: Item) -> int:
        self._outputs.append(item)
        return len(self._outputs) - 1

    def _open_message(self) -> None:
        """The message item begins (at the first word or sound; at the end of a reply that had none)."""
        if self._message_index is not None:
            return
        p = self.plan
        item = p.item
        item.status = "in_progress"
        self._message_index = self._output_index(item)
        self.events.put(
            ev.OutputItemAdded(response_id=p.response_id, output_index=self._message_index, item=item.wire())
        )
        if p.in_conversation:
            self.conversation.add(item)
            self.conversation.opened(item)
        part = {"type": "audio", "transcript": ""} if p.audio else {"type": "text", "text": ""}
        self.events.put(ev.ContentPartAdded(part=part, **self._where()))

    def _finish(self, ended: ReplyEnded) -> None:
        p, item = self.plan, self.plan.item
        cancelled = ended.state is R.CANCELLED
        if self._message_index is None and not self.calls and ended.state is not R.FAILED:
            self._open_message()  # a reply that said nothing is still an (empty) message; a failed one: none
        if self._message_index is not None:
            self._finish_message(ended)
        elif p.audio and cancelled:
            self.encoder.flush()
        self.calls.finish(completed=ended.state is R.DONE)
        item.status = "completed" if ended.state is R.DONE else "incomplete"
        self.events.put(ev.ResponseDone(response=self._response(WIRE_STATUS[ended.state])))

    def _finish_message(self, ended: ReplyEnded) -> None:
        p, item, where = self.plan, self.plan.item, self._where()
        if p.audio:
            item.text = self.playback.text if self.playback is not None else ""
            if ended.stopped_ms is not None:
                self.encoder.flush()  # the rest of this response's audio is never sent
                self.conversation.truncate(item, ended.stopped_ms)
            elif tail := self.encoder.flush():
                self.events.put(ev.AudioDelta(delta=tail, **where))
            self.events.put(ev.AudioDone(**where))
            self.events.put(ev.AudioTranscriptDone(transcript=item.text, **where))
            part = {"type": "audio", "transcript": item.text}
        else:
            item.text = "".join(self._text).strip()
            self.events.put(ev.TextDone(text=item.text, **where))
            part = {"type": "text", "text": item.text}
        item.status = "completed" if ended.state is R.DONE else "incomplete"
        self.events.put(ev.ContentPartDone(part=part, **where))
        self.events.put(
            ev.OutputItemDone(response_id=p.response_id, output_index=where["output_index"], item=item.wire())
        )
        if p.in_conversation:
            self.conversation.closed(item)

    def _response(self, status: str) -> dict[str, Any]:
        sent_ms = self.playback.sent_ms if self.playback is not None else 0.0
        return response_object(self.plan, self.figures, status, self._outputs, sent_ms, self.figures.usage)
