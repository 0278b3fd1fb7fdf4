"""The voice agent's OpenTelemetry spans: each user turn and each reply, in the session's trace.

Spans are built when what they tell is over, with the times the turn and the reply passed each stage
(``agent.breakdown``), so nothing is held open across the agent's threads and tasks and nothing at
all is done while tracing is off (``core.tracing.tracing_on``). Their parent is the span current when
the agent was made: the worker's ``worker.session``, itself a child of the gateway's ``session``.

- ``user_turn`` (from when its speech was heard to start to its final transcript) with children
  ``speech`` (to the end of the speech),
  ``end_of_turn`` (the turn detection's wait and decision: ``noticed_ms`` says when the pause was
  heard) and ``asr.final`` (the final transcript);
- ``reply`` (the LLM call to its report), a child of the turn it answers, with events
  ``llm.first_token``, ``first_words``, ``tts.first_audio``, ``first_audio_sent``, ``tool_call``,
  ``paused``, ``resumed`` / ``barge_in`` (the interruption's decision), then ``played`` or ``cut``;
- ``error``: a failure the agent went on after (its code and category); ``barge_in``: a reply that
  had finished but still played cut by the user (``ReplyCut``).

Attributes say the model (``omnivox.llm``), voice, turn detection mode and the ids of the turn and
reply; the worker and engine are the parent span's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from omnivox.agent.breakdown import StageTimes
from omnivox.agent.events import (
    AgentEvent,
    Failure,
    ReplyCall,
    ReplyCut,
    ReplyEnded,
    ReplyPaused,
    ReplyResumed,
    ReplyState,
    SpeechStarted,
    UserTurn,
)
from omnivox.agent.reply import Reply, ReplyPlan
from omnivox.agent.turns import TurnSettings
from omnivox.core.tracing import traceparent, tracer, tracing_on, wall_ns

KEEP = 4  # turns whose spans a reply may still be a child of


def turn_detection(turns: TurnSettings | None) -> str:
    """The turn detection mode as a span attribute: manual, server_vad or semantic_vad:<eagerness>."""
    if turns is None:
        return "manual"
    eagerness = turns.params.eagerness
    return "server_vad" if eagerness is None else f"semantic_vad:{eagerness}"


@dataclass
class _ReplyNotes:
    """What happened to a reply while it spoke, for its span: (monotonic time, name, attributes)."""

    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)


class AgentTraces:
    def __init__(self, *, model: str, mode: Callable[[], str], clock: Callable[[], float] = time.monotonic):
        self.model = model
        self.mode = mode  # the turn detection in effect: manual, server_vad, semantic_vad:<eagerness>
        self.clock = clock
        self.parent = otel_context.get_current()  # the worker's session span
        self.traceparent = traceparent() if tracing_on() else None  # it, for the models' requests
        # when the current turn's speech was heard to start (its audio may come faster than real time,
        # held while the session waited, so its length in audio says less)
        self._speech_heard: float | None = None
        self._turns: dict[float, trace.Span] = {}  # speech end -> its turn's span
        self._replies: dict[str, _ReplyNotes] = {}

    def observe(self, emit: Callable[[AgentEvent], None]) -> Callable[[AgentEvent], None]:
        """``emit``, seeing each event on its way (it is passed on as it is)."""
        if not tracing_on():
            return emit

        def seen(event: AgentEvent) -> None:
            self._see(event)
            emit(event)

        return seen

    # ---- the events

    def _see(self, event: AgentEvent) -> None:
        now = self.clock()
        if isinstance(event, SpeechStarted):
            self._speech_heard = now
        elif isinstance(event, Failure):
            self._error(event, now)
        elif isinstance(event, ReplyCall) and event.call.name:
            self._note(event.reply_id, now, "tool_call", {"omnivox.tool": event.call.name})
        elif isinstance(event, ReplyPaused):
            self._note(event.reply_id, now, "paused", {"omnivox.at_ms": event.at_ms})
        elif isinstance(event, ReplyResumed):
            decision = {"omnivox.decision": "resume", "omnivox.reason": event.reason}
            self._note(event.reply_id, now, "resumed", decision)
        elif isinstance(event, ReplyEnded):
            self._ended(event, now)
        elif isinstance(event, ReplyCut):  # a barge-in on a reply whose span is made: a span of its own
            cut = {"omnivox.decision": "cut", "omnivox.reply_id": event.reply_id}
            self._instant("barge_in", now, {**cut, "omnivox.stopped_ms": event.stopped_ms})

    def _note(self, reply_id: str, at: float, name: str, attrs: dict[str, Any]) -> None:
        self._replies.setdefault(reply_id, _ReplyNotes()).events.append((at, name, attrs))

    def _ended(self, event: ReplyEnded, now: float) -> None:
        if event.state is ReplyState.DISCARDED:
            self._replies.pop(event.reply_id, None)
            return
        if event.figures.reason == "turn_detected":
            self._note(event.reply_id, now, "barge_in", {"omnivox.decision": "cut"})
        if event.state is ReplyState.CANCELLED:
            self._note(event.reply_id, now, "cut", {"omnivox.stopped_ms": event.stopped_ms or 0.0})
        elif event.state is ReplyState.DONE:
            self._note(event.reply_id, now, "played", {})

    def _error(self, event: Failure, now: float) -> None:
        err = event.error
        attrs = {"omnivox.error.code": err.code, "omnivox.error.category": str(err.category)}
        self._instant("error", now, attrs, Status(StatusCode.ERROR, err.code))

    def _instant(self, name: str, now: float, attrs: dict[str, Any], status: Status | None = None) -> None:
        at = self._span_times(now)(now)
        span = tracer().start_span(name, context=self.parent, start_time=at, attributes=attrs)
        if status is not None:
            span.set_status(status)
        span.end(end_time=at)

    # ---- the agent's calls

    def traced(self, plan: ReplyPlan) -> ReplyPlan:
        """``plan`` with its request made under the session's span (a pipeline's stages continue it)."""
        if self.traceparent is None:
            return plan
        return replace(plan, request=replace(plan.request, traceparent=self.traceparent))

    def user_turn(self, turn: UserTurn, times: StageTimes | None) -> None:
        """The user's turn is over (``times``: its hearing's stages, where they were measured)."""
        if not tracing_on() or times is None or times.speech_end is None or times.transcribed is None:
            return
        now = self.clock()
        ns = self._span_times(now)
        end = times.speech_end
        start = min(end, self._speech_heard if self._speech_heard is not None else end)
        mode = self.mode()
        span = tracer().start_span(
            "user_turn",
            context=self.parent,
            start_time=ns(start),
            attributes={"omnivox.turn_id": turn.turn_id, "omnivox.turn_detection": mode},
        )
        inside = trace.set_span_in_context(span, self.parent)
        decided = times.decided if times.decided is not None else times.transcribed
        for name, a, b in (
            ("speech", start, end),
            ("end_of_turn", end, decided),
            ("asr.final", decided, times.transcribed),
        ):
            child = tracer().start_span(name, context=inside, start_time=ns(a))
            if name == "end_of_turn":
                child.set_attribute("omnivox.turn_detection", mode)
                if times.noticed is not None:
                    child.set_attribute("omnivox.noticed_ms", round((times.noticed - end) * 1000, 1))
            child.end(end_time=ns(b))
        span.end(end_time=ns(times.transcribed))
        self._turns = {**dict(list(self._turns.items())[-(KEEP - 1) :]), end: span}

    def reply_over(self, reply: Reply) -> None:
        """A reply that was heard is over: its span, under the turn it answers."""
        notes = self._replies.pop(reply.reply_id, _ReplyNotes())
        if not tracing_on():
            return
        now = self.clock()
        ns = self._span_times(now)
        figures, times = reply.figures, reply.figures.times
        began = now
        if times.llm_first_token is not None and figures.llm_ttft_s is not None:
            began = times.llm_first_token - figures.llm_ttft_s
        elif times.first_audio_sent is not None:
            began = times.first_audio_sent
        turn = self._turns.get(reply.plan.speech_end_at) if reply.plan.speech_end_at is not None else None
        parent = trace.set_span_in_context(turn, self.parent) if turn is not None else self.parent
        attributes: dict[str, Any] = {
            "omnivox.reply_id": reply.reply_id,
            "omnivox.state": reply.state.value,
            "omnivox.llm": self.model,
            "omnivox.voice": reply.plan.request.voice or "",
            "omnivox.turn_detection": self.mode(),
        }
        if figures.voice_to_voice_s is not None:
            attributes["omnivox.voice_to_voice_ms"] = round(figures.voice_to_voice_s * 1000, 1)
        if figures.usage is not None:
            attributes["omnivox.output_tokens"] = figures.usage.output_tokens
        span = tracer().start_span("reply", context=parent, start_time=ns(began), attributes=attributes)
        stages = (
            ("llm.first_token", times.llm_first_token),
            ("first_words", times.first_words),
            ("tts.first_audio", times.tts_first_audio),
            ("first_audio_sent", times.first_audio_sent),
        )
        for name, at in stages:
            if at is not None:
                span.add_event(name, timestamp=ns(at))
        for at, name, attrs in notes.events:
            span.add_event(name, attributes=attrs, timestamp=ns(at))
        if figures.error is not None:
            span.set_status(Status(StatusCode.ERROR, figures.error.code))
            span.set_attribute("omnivox.error.code", figures.error.code)
        span.end(end_time=ns(now))

    def _span_times(self, now: float) -> Callable[[float], int]:
        """Moments on the agent's clock -> span times (one reading of both clocks for a whole span)."""
        wall = time.time()
        return lambda at: wall_ns(at, now, wall)
