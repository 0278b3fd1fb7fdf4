"""The OpenAI Realtime API (``WS /v1/realtime``): client events, server events, error shape.

Event names and shapes follow the GA API as the official ``openai`` SDK implements it (its types
under ``openai/types/realtime/``). Beta names are accepted as aliases on input (``BETA_CLIENT_TYPES``)
and, for clients that ask with ``OpenAI-Beta: realtime=v1``, used on output (``BETA_SERVER_TYPES``).

This module holds the client events and the protocol's description (``REALTIME``); the server
events are in ``protocol.realtime.events`` and the session configuration in
``protocol.realtime.session_config``. Omnivox extension events use the ``omnivox.`` prefix and reach only
clients that ask with ``?omnivox_events=true`` (``wants_extensions``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from omnivox.core.config import Settings
from omnivox.core.errors import WS_POLICY, OmnivoxError, QueueFull, SessionLimitReached, TicketCancelled
from omnivox.protocol.control.queue import QueueNotice
from omnivox.protocol.realtime.events import EXTENSION_PREFIX, QueueStatus, error_event
from omnivox.protocol.realtime.media import REALTIME_MEDIA
from omnivox.protocol.realtime.phone import REALTIME_PHONE
from omnivox.protocol.realtime.session_config import SessionConfig, apply_update
from omnivox.protocol.spec import Parser, WireProtocol, Withheld
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.protocol.timelines.realtime import RealtimeTimeline
from omnivox.protocol.wire import Msg, known_types

# ---------------------------------------------------------------- conversation items


class ItemContent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["input_text", "input_audio", "input_image", "text", "output_text", "output_audio", "audio"]
    text: str | None = None
    audio: str | None = None  # base64, in the session's input format (never echoed back)
    transcript: str | None = None
    image_url: str | None = None


class ItemIn(BaseModel):
    """A conversation item a client creates: a message, a function call, a call's output, or the
    answer to an MCP call's approval request.

    Which fields each type needs (``role`` for a message; ``call_id``, ``name`` for a call;
    ``call_id``, ``output`` for an output) is checked by the session, which names the missing one.
    """

    model_config = ConfigDict(extra="ignore")

    id: str | None = Field(None, max_length=64)
    type: Literal["message", "function_call", "function_call_output", "mcp_approval_response"] = "message"
    role: Literal["user", "assistant", "system"] | None = None
    content: list[ItemContent] = Field(default_factory=list, max_length=64)
    call_id: str | None = Field(None, min_length=1, max_length=128)
    name: str | None = Field(None, max_length=64)
    arguments: str | None = None  # JSON text
    output: str | None = None
    approval_request_id: str | None = Field(None, max_length=128)  # mcp_approval_response: what it answers
    approve: bool | None = None
    reason: str | None = Field(None, max_length=4096)


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


class OutputAudioBufferReport(_ClientEvent):
    """Omnivox's extension: the client's player says a response's audio ``started`` playing, or
    ``stopped`` (all of it has played), as a WebRTC call says ``output_audio_buffer.started`` /
    ``.stopped``. The gateway sends it for WebRTC and phone callers (their track's and carrier's
    reports); any client with a player may: the session then counts a reply as playing by these
    reports rather than by its own model of the client's player. ``queued``: the player has the
    audio and will report when it starts (a carrier that buffers what it is sent): the session
    waits for those reports from then on."""

    type: Literal["omnivox.output_audio_buffer.report"] = "omnivox.output_audio_buffer.report"
    response_id: str = Field(min_length=1, max_length=128)
    state: Literal["queued", "started", "stopped"]


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
    tools: list[dict[str, Any]] | None = None  # checked as session.tools are
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


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
    | OutputAudioBufferReport
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


# ---------------------------------------------------------------- the protocol

EXTENSIONS_QUERY = "omnivox_events"  # ?omnivox_events=true: send omnivox's own events too


def wants_extensions(query: Mapping[str, str]) -> bool:
    """Whether the client asked for omnivox's extension events (the pages and benches do)."""
    return query.get(EXTENSIONS_QUERY, "").lower() in ("1", "true", "yes")


def is_extension(frame: str | bytes) -> bool:
    return isinstance(frame, str) and frame.startswith(EXTENSION_PREFIX)


class RealtimeProtocol(WireProtocol):
    """``WS /v1/realtime``: one worker for the session's whole life (task type ``realtime``)."""

    name = "realtime"
    path = "/v1/realtime"
    worker_paths = ("/ws/realtime", "/ws/realtime/{session_id}")
    scope = "session"
    parser = Parser(CLIENT_ADAPTER, BETA_CLIENT_TYPES)

    def session_id(self, path_params: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        return query.get("session_id")

    def task_type(self, session_id: str, query: Mapping[str, str]) -> str:
        return "realtime"

    def subprotocol(self, offered: list[str]) -> str | None:
        if "realtime" in offered:
            return "realtime"
        return offered[0] if offered else None

    def worker_params(self, headers: Mapping[str, str], query: Mapping[str, str]) -> dict[str, str]:
        params = {"beta": "1"} if "realtime=v1" in headers.get("openai-beta", "") else {}
        if query.get("intent") == "transcription":  # a transcription session from the start
            params["intent"] = "transcription"
        return params

    def max_wait_s(self, settings: Settings) -> float | None:
        return settings.realtime_max_wait_s

    def held_bytes(self, settings: Settings) -> int:
        return settings.realtime_queued_bytes

    def timeline_reader(self) -> TimelineReader:
        return RealtimeTimeline()

    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str:
        return error_event(err, event_id).model_dump_json()

    def error_code(self, err: OmnivoxError) -> str:
        return err.wire_code

    def notice_frame(self, notice: QueueNotice) -> str | None:
        if notice.kind == "queue_done" and not notice.was_queued:
            return None  # a worker was free at once: the client hears nothing of a queue
        return QueueStatus(
            status="assigned" if notice.kind == "queue_done" else "queued",
            ticket_id=notice.ticket_id,
            position=notice.position,
            queue_length=notice.queue_length,
            estimated_wait_s=notice.estimated_wait_s,
            resume_token=notice.resume_token,
            resumed=notice.resumed or None,
        ).model_dump_json(exclude_none=True)

    client_secrets = True
    media = REALTIME_MEDIA
    phone = REALTIME_PHONE

    def session_defaults(self, session: dict[str, Any]) -> dict[str, Any]:
        return apply_update(SessionConfig(), session).wire()

    def defaults_frames(self, session: dict[str, Any]) -> list[str]:
        return [json.dumps({"type": "session.update", "event_id": "omnivox_defaults", "session": session})]

    def call_id(self, query: Mapping[str, str]) -> str | None:
        return query.get("call_id")

    def withheld(self, query: Mapping[str, str]) -> Withheld | None:
        return None if wants_extensions(query) else is_extension

    def refusal(self, err: OmnivoxError) -> OmnivoxError:
        """Every refusal is ``session_limit_reached`` (close 1008), as OpenAI words capacity."""
        if isinstance(err, QueueFull | TicketCancelled):
            return SessionLimitReached(f"the server is at capacity: {err.message}")
        return err if err.close_code == WS_POLICY else SessionLimitReached(err.message)


REALTIME = RealtimeProtocol()
