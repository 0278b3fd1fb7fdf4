"""The OpenAI Realtime API (``WS /v1/realtime``): client events, server events, error shape.

Event names and shapes follow the GA API as the official ``openai`` SDK implements it (its types
under ``openai/types/realtime/``). Beta names are accepted as aliases on input (``BETA_CLIENT_TYPES``)
and, for clients that ask with ``OpenAI-Beta: realtime=v1``, used on output (``BETA_SERVER_TYPES``).

Session configuration lives in ``protocol.realtime_session``; this module holds the events.
Omnivox extensions use the ``omnivox.`` prefix: ``omnivox.queue`` tells a waiting client its place,
``omnivox.internal.*`` events go from worker to gateway only (never to clients).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from omnivox.core.errors import OmnivoxError
from omnivox.core.ids import new_id
from omnivox.protocol.wire import Msg, known_types


def event_id() -> str:
    return new_id("event")


# ---------------------------------------------------------------- conversation items


class ItemContent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["input_text", "input_audio", "input_image", "text", "output_text", "output_audio", "audio"]
    text: str | None = None
    audio: str | None = None  # base64, in the session's input format (never echoed back)
    transcript: str | None = None
    image_url: str | None = None


class ItemIn(BaseModel):
    """A conversation item a client creates (messages only: omnivox has no tools yet)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = Field(None, max_length=64)
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system"]
    content: list[ItemContent] = Field(default_factory=list, max_length=64)


# ---------------------------------------------------------------- client -> server


class _ClientEvent(Msg):
    event_id: str | None = Field(None, max_length=128)


class SessionUpdate(_ClientEvent):
    type: Literal["session.update"] = "session.update"
    session: dict[str, Any]


class InputAudioBufferAppend(_ClientEvent):
    type: Literal["input_audio_buffer.append"] = "input_audio_buffer.append"
    audio: str


class InputAudioBufferCommit(_ClientEvent):
    type: Literal["input_audio_buffer.commit"] = "input_audio_buffer.commit"


class InputAudioBufferClear(_ClientEvent):
    type: Literal["input_audio_buffer.clear"] = "input_audio_buffer.clear"


class OutputAudioBufferClear(_ClientEvent):
    type: Literal["output_audio_buffer.clear"] = "output_audio_buffer.clear"


class ConversationItemCreate(_ClientEvent):
    type: Literal["conversation.item.create"] = "conversation.item.create"
    previous_item_id: str | None = None
    item: ItemIn


class ConversationItemRetrieve(_ClientEvent):
    type: Literal["conversation.item.retrieve"] = "conversation.item.retrieve"
    item_id: str


class ConversationItemTruncate(_ClientEvent):
    type: Literal["conversation.item.truncate"] = "conversation.item.truncate"
    item_id: str
    content_index: int = Field(0, ge=0)
    audio_end_ms: int = Field(ge=0)


class ConversationItemDelete(_ClientEvent):
    type: Literal["conversation.item.delete"] = "conversation.item.delete"
    item_id: str


class ResponseParams(BaseModel):
    """``response.create``'s ``response``: per-response overrides of the session."""

    model_config = ConfigDict(extra="ignore")

    instructions: str | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    modalities: list[Literal["text", "audio"]] | None = None  # beta name
    max_output_tokens: int | Literal["inf"] | None = None
    max_response_output_tokens: int | Literal["inf"] | None = None  # beta name
    voice: str | None = None  # beta
    audio: dict[str, Any] | None = None
    conversation: str | None = None  # "auto" (default) or "none": out of band
    input: list[ItemIn] | None = None
    metadata: dict[str, str] | None = None


class ResponseCreate(_ClientEvent):
    type: Literal["response.create"] = "response.create"
    response: ResponseParams | None = None


class ResponseCancel(_ClientEvent):
    type: Literal["response.cancel"] = "response.cancel"
    response_id: str | None = None


ClientEvent = Annotated[
    SessionUpdate
    | InputAudioBufferAppend
    | InputAudioBufferCommit
    | InputAudioBufferClear
    | OutputAudioBufferClear
    | ConversationItemCreate
    | ConversationItemRetrieve
    | ConversationItemTruncate
    | ConversationItemDelete
    | ResponseCreate
    | ResponseCancel,
    Field(discriminator="type"),
]
CLIENT_ADAPTER: TypeAdapter[ClientEvent] = TypeAdapter(ClientEvent)
CLIENT_TYPES = known_types(CLIENT_ADAPTER)
# beta client event names -> GA names (the payloads are the same)
BETA_CLIENT_TYPES = {"transcription_session.update": "session.update"}

# ---------------------------------------------------------------- server -> client


class ServerEvent(Msg):
    event_id: str = Field(default_factory=event_id)


class ErrorDetail(BaseModel):
    type: str  # invalid_request_error | server_error
    code: str | None = None
    message: str
    param: str | None = None
    event_id: str | None = None  # the client event that caused it


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


class TranscriptionFailed(ServerEvent):
    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    item_id: str
    content_index: int = 0
    error: dict[str, Any]


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


class QueueStatus(ServerEvent):
    """omnivox extension: the session waits for a worker (sent on every change of its place)."""

    type: Literal["omnivox.queue"] = "omnivox.queue"
    status: Literal["queued", "assigned"]
    ticket_id: str
    position: int = 0
    queue_length: int = 0
    estimated_wait_s: float = 0.0


class InternalMetrics(Msg):
    """Worker -> gateway only: figures for the gateway's Prometheus metrics. ``type`` comes first in
    the JSON so the gateway can tell these apart without parsing every frame it relays."""

    type: Literal["omnivox.internal.metrics"] = "omnivox.internal.metrics"
    voice_to_voice_s: float | None = None  # end of user speech -> first audio delta
    llm_ttft_s: float | None = None
    tts_ttfa_s: float | None = None
    interrupted: bool = False
    response_done: bool = False
    error_code: str | None = None
    # work since the previous report: time spent hearing (VAD + ASR) / speaking (TTS), and the
    # audio it covered; their ratios are the real-time factors under the load the worker is under
    asr_busy_s: float = 0.0
    asr_audio_s: float = 0.0
    tts_busy_s: float = 0.0
    tts_audio_s: float = 0.0


INTERNAL_PREFIX = '{"type":"omnivox.internal.'

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
