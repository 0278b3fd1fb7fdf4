"""Server events of the OpenAI Realtime API (``WS /v1/realtime``), GA names; beta names for clients
that ask for them (``BETA_SERVER_TYPES``).

omnivox's own events (``ExtensionEvent``) reach only clients that ask for them (``?omnivox_events=true``;
stock clients take an event they cannot parse for an error): ``omnivox.queue`` for a session waiting
for a worker; ``omnivox.interruption.paused`` / ``.resumed`` tell a client that a reply's audio
stopped for speech over it and plays on after all (it was a cough, a backchannel or its own echo);
``omnivox.warning`` names a setting accepted but not served. Their ``type`` comes first in their
JSON (``EXTENSION_PREFIX``), so the gateway withholds them without parsing frames.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from omnivox.core.errors import OmnivoxError
from omnivox.core.ids import new_id
from omnivox.protocol.wire import Msg


def event_id() -> str:
    return new_id("event")


class ServerEvent(Msg):
    event_id: str = Field(default_factory=event_id)


class ErrorDetail(BaseModel):
    type: str  # invalid_request_error | server_error
    code: str | None = None
    message: str
    param: str | None = None
    event_id: str | None = None  # the client event that caused it


EXTENSION_PREFIX = '{"type":"omnivox.'


class ExtensionEvent(Msg):
    """An omnivox extension event (sent only to clients that ask; see the module doc)."""

    type: str  # first: the frame starts with EXTENSION_PREFIX
    event_id: str = Field(default_factory=event_id)


class Error(ServerEvent):
    type: Literal["error"] = "error"
    error: ErrorDetail


def error_event(err: OmnivoxError, client_event_id: str | None = None) -> Error:
    """The OpenAI-shaped ``error`` event for ``err`` (caused by the client event ``client_event_id``)."""
    server_fault = err.http_status in (500, 502)
    param = err.details.get("param")
    return Error(
        error=ErrorDetail(
            type="server_error" if server_fault else "invalid_request_error",
            code=err.wire_code,
            message=err.message,
            param=param if isinstance(param, str) else None,
            event_id=client_event_id,
        )
    )


class SessionCreated(ServerEvent):
    type: Literal["session.created"] = "session.created"
    session: dict[str, Any]


class SessionUpdated(ServerEvent):
    type: Literal["session.updated"] = "session.updated"
    session: dict[str, Any]


class SpeechStarted(ServerEvent):
    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int
    item_id: str


class SpeechStopped(ServerEvent):
    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int
    item_id: str


class Committed(ServerEvent):
    type: Literal["input_audio_buffer.committed"] = "input_audio_buffer.committed"
    item_id: str
    previous_item_id: str | None = None


class Cleared(ServerEvent):
    type: Literal["input_audio_buffer.cleared"] = "input_audio_buffer.cleared"


class TimeoutTriggered(ServerEvent):
    type: Literal["input_audio_buffer.timeout_triggered"] = "input_audio_buffer.timeout_triggered"
    audio_start_ms: int
    audio_end_ms: int
    item_id: str


class OutputAudioCleared(ServerEvent):
    type: Literal["output_audio_buffer.cleared"] = "output_audio_buffer.cleared"
    response_id: str


class ItemAdded(ServerEvent):
    type: Literal["conversation.item.added"] = "conversation.item.added"
    previous_item_id: str | None = None
    item: dict[str, Any]


class ItemDone(ServerEvent):
    type: Literal["conversation.item.done"] = "conversation.item.done"
    previous_item_id: str | None = None
    item: dict[str, Any]


class ItemRetrieved(ServerEvent):
    type: Literal["conversation.item.retrieved"] = "conversation.item.retrieved"
    item: dict[str, Any]


class ItemTruncated(ServerEvent):
    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    item_id: str
    content_index: int = 0
    audio_end_ms: int


class ItemDeleted(ServerEvent):
    type: Literal["conversation.item.deleted"] = "conversation.item.deleted"
    item_id: str


class TranscriptionDelta(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.delta"] = (
        "conversation.item.input_audio_transcription.delta"
    )
    item_id: str
    content_index: int = 0
    delta: str


class TranscriptionCompleted(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed"
    )
    item_id: str
    content_index: int = 0
    transcript: str
    usage: dict[str, Any] = Field(default_factory=lambda: {"type": "duration", "seconds": 0.0})


class ResponseCreated(ServerEvent):
    type: Literal["response.created"] = "response.created"
    response: dict[str, Any]


class ResponseDone(ServerEvent):
    type: Literal["response.done"] = "response.done"
    response: dict[str, Any]


class _ItemEvent(ServerEvent):
    response_id: str
    output_index: int = 0


class OutputItemAdded(_ItemEvent):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    item: dict[str, Any]


class OutputItemDone(_ItemEvent):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    item: dict[str, Any]


class _PartEvent(_ItemEvent):
    item_id: str
    content_index: int = 0


class ContentPartAdded(_PartEvent):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    part: dict[str, Any]


class ContentPartDone(_PartEvent):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    part: dict[str, Any]


class AudioDelta(_PartEvent):
    type: Literal["response.output_audio.delta"] = "response.output_audio.delta"
    delta: str


class AudioDone(_PartEvent):
    type: Literal["response.output_audio.done"] = "response.output_audio.done"


class AudioTranscriptDelta(_PartEvent):
    type: Literal["response.output_audio_transcript.delta"] = "response.output_audio_transcript.delta"
    delta: str


class AudioTranscriptDone(_PartEvent):
    type: Literal["response.output_audio_transcript.done"] = "response.output_audio_transcript.done"
    transcript: str


class TextDelta(_PartEvent):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    delta: str


class TextDone(_PartEvent):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    text: str


class FunctionCallArgumentsDelta(_ItemEvent):
    type: Literal["response.function_call_arguments.delta"] = "response.function_call_arguments.delta"
    item_id: str
    call_id: str
    delta: str


class FunctionCallArgumentsDone(_ItemEvent):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    call_id: str
    name: str
    arguments: str


# ---- MCP tools the server calls (``worker.realtime.mcp``)


class McpListToolsInProgress(ServerEvent):
    type: Literal["mcp_list_tools.in_progress"] = "mcp_list_tools.in_progress"
    item_id: str


class McpListToolsCompleted(ServerEvent):
    type: Literal["mcp_list_tools.completed"] = "mcp_list_tools.completed"
    item_id: str


class McpListToolsFailed(ServerEvent):
    type: Literal["mcp_list_tools.failed"] = "mcp_list_tools.failed"
    item_id: str


class McpCallArgumentsDelta(_ItemEvent):
    type: Literal["response.mcp_call_arguments.delta"] = "response.mcp_call_arguments.delta"
    item_id: str
    delta: str


class McpCallArgumentsDone(_ItemEvent):
    type: Literal["response.mcp_call_arguments.done"] = "response.mcp_call_arguments.done"
    item_id: str
    arguments: str


class McpCallInProgress(ServerEvent):
    type: Literal["response.mcp_call.in_progress"] = "response.mcp_call.in_progress"
    item_id: str
    output_index: int


class McpCallCompleted(ServerEvent):
    type: Literal["response.mcp_call.completed"] = "response.mcp_call.completed"
    item_id: str
    output_index: int


class McpCallFailed(ServerEvent):
    type: Literal["response.mcp_call.failed"] = "response.mcp_call.failed"
    item_id: str
    output_index: int


class RateLimit(BaseModel):
    name: Literal["requests", "tokens"]
    limit: int
    remaining: int
    reset_seconds: float


class RateLimitsUpdated(ServerEvent):
    """At each response's start: omnivox's own limits as they stand for this session."""

    type: Literal["rate_limits.updated"] = "rate_limits.updated"
    rate_limits: list[RateLimit]


class OutputAudioStarted(ServerEvent):
    """WebRTC: the call's outgoing track began playing a response's audio."""

    type: Literal["output_audio_buffer.started"] = "output_audio_buffer.started"
    response_id: str


class OutputAudioStopped(ServerEvent):
    """WebRTC: the call's outgoing track has played all of a response's audio."""

    type: Literal["output_audio_buffer.stopped"] = "output_audio_buffer.stopped"
    response_id: str


class SettingWarning(ExtensionEvent):
    """omnivox extension: a setting was accepted but is not served (said once per setting)."""

    type: Literal["omnivox.warning"] = "omnivox.warning"
    code: str = "setting_not_served"
    message: str
    param: str | None = None


class QueueStatus(ExtensionEvent):
    """omnivox extension: the session waits for a worker (sent on every change of its place)."""

    type: Literal["omnivox.queue"] = "omnivox.queue"
    status: Literal["queued", "assigned"]
    ticket_id: str
    position: int = 0
    queue_length: int = 0
    estimated_wait_s: float = 0.0
    # on the first "queued": connect again with ?resume=<token> after a drop to keep the place
    resume_token: str | None = None
    resumed: bool | None = None  # true: the place the client held before its connection dropped


class InterruptionPaused(ExtensionEvent):
    """omnivox extension: speech over the reply paused its audio at ``audio_end_ms`` of the item's
    audio (a client may pause its player there); a ``response.done`` or ``.resumed`` follows."""

    type: Literal["omnivox.interruption.paused"] = "omnivox.interruption.paused"
    response_id: str
    item_id: str
    audio_end_ms: int


class InterruptionResumed(ExtensionEvent):
    """omnivox extension: the speech was not an interruption; the reply plays on from
    ``audio_start_ms`` (nothing was truncated)."""

    type: Literal["omnivox.interruption.resumed"] = "omnivox.interruption.resumed"
    response_id: str
    item_id: str
    audio_start_ms: int
    reason: Literal["no_words", "no_speech", "backchannel", "echo", "unclear", "sounds_backchannel"]


class InterruptionJudged(ExtensionEvent):
    """omnivox extension: speech over the reply was judged (``verdict``: no_words, no_speech,
    backchannel, echo, unclear, sounds_backchannel, words), and the reply resumed, was cut, or
    stays paused (``wait``: an early partial transcript's few words, which do not cut; the settled
    words decide, in a later judgement); ``text`` and ``evidence`` (the recogniser's no-speech
    probability and mean log-probability, voiced ms, level against the reply in dB, the backchannel
    witness's margin) are what it was judged on. Sent before the ``.resumed`` or the cancellation."""

    type: Literal["omnivox.interruption.judged"] = "omnivox.interruption.judged"
    verdict: str
    action: Literal["resume", "cut", "wait"]
    text: str
    evidence: dict[str, float]


class TurnBreakdownReport(ExtensionEvent):
    """omnivox extension: where a reply's voice-to-voice went, sent when the reply is over: each
    stage it passed (``noticed``, ``decided``, ``transcribed``, ``llm_first_token``,
    ``first_words``, ``tts_first_audio``, ``first_audio_sent``) in milliseconds after the end of
    the user's speech that prompted it."""

    type: Literal["omnivox.turn.breakdown"] = "omnivox.turn.breakdown"
    response_id: str
    stages_ms: dict[str, float]


# GA -> beta names, for clients connecting with "OpenAI-Beta: realtime=v1"
BETA_SERVER_TYPES = {
    "conversation.item.added": "conversation.item.created",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
}
# and back, for clients of omnivox (tests, benchmarks, pages) reading either naming
GA_SERVER_TYPES = {beta: ga for ga, beta in BETA_SERVER_TYPES.items()}


def ga_type(event_type: str) -> str:
    """The GA name of a server event type given in either naming."""
    return GA_SERVER_TYPES.get(event_type, event_type)
