"""Turn-based streaming protocol (``/ws/streaming/{session_id}``), the MiniCPM-o demo message set.

Client -> server: prefill, generate, stop, close.
Server -> client: queued, queue_update, queue_done (protocol.control.queue), prefill_done, chunk, done, error.

Each turn (``prefill`` .. ``done``) takes a worker afresh (``STREAMING`` is turn-scoped), routed by
the hash of the conversation before the last message: a worker whose cache holds it computes only
the new message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError, PrefillRequired
from omnivox.protocol.chat import ChatMessage, history_hash
from omnivox.protocol.control.queue import QueueNotice, queue_message
from omnivox.protocol.spec import Parser, TurnRoute, WireProtocol
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.protocol.timelines.streaming import StreamingTimeline
from omnivox.protocol.wire import Msg, known_types

# ---- client -> server


class Prefill(Msg):
    type: Literal["prefill"] = "prefill"
    messages: list[ChatMessage] = Field(min_length=1)
    is_last_chunk: bool = True
    ref_audio_base64: str | None = None
    record: bool | None = None  # opt out of (or into) session recording


class Generate(Msg):
    type: Literal["generate"] = "generate"
    max_new_tokens: int = Field(256, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)  # None: the engine's default
    generate_audio: bool = False
    voice: str | None = None  # a voice from GET /v1/voices (None: the default)


class Stop(Msg):
    type: Literal["stop"] = "stop"


class Close(Msg):
    type: Literal["close"] = "close"


ClientMessage = Annotated[Prefill | Generate | Stop | Close, Field(discriminator="type")]
CLIENT_ADAPTER: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
CLIENT_TYPES = known_types(CLIENT_ADAPTER)

# ---- server -> client


class PrefillDone(Msg):
    type: Literal["prefill_done"] = "prefill_done"
    prompt_length: int  # tokens in the KV cache after the prefill
    message_count: int  # messages the worker holds
    cached_tokens: int  # tokens reused from the cache (0 on a miss)
    input_tokens: int  # tokens computed by this prefill
    cache_hit: bool = False
    worker_id: str | None = None
    transcript: str | None = None  # what was heard in the audio parts (engines with audio in)


class ReplyChunk(Msg):
    type: Literal["chunk"] = "chunk"
    chunk_index: int
    text_delta: str = ""
    audio_data: str | None = None  # base64 PCM16 mono
    audio_sample_rate: int | None = None
    is_final: bool = False


class TokenStats(Msg):
    cached_tokens: int = 0
    input_tokens: int = 0
    generated_tokens: int = 0
    total_tokens: int = 0


class Done(Msg):
    type: Literal["done"] = "done"
    elapsed_ms: float
    stopped: bool = False
    text: str = ""  # the whole reply, as the worker cached it
    ttft_ms: float | None = None
    history_hash: str | None = None  # hash of the conversation the worker's cache now holds
    token_stats: TokenStats = Field(default_factory=TokenStats)
    error: str | None = None  # the code of the error that cut the generation short, if one did


ServerMessage = Annotated[PrefillDone | ReplyChunk | Done, Field(discriminator="type")]
SERVER_ADAPTER: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)
SERVER_TYPES = known_types(SERVER_ADAPTER) | {"error"}


# ---- the protocol


class StreamingProtocol(WireProtocol):
    name = "streaming"
    path = "/ws/streaming/{session_id}"
    worker_paths = ("/ws/streaming", "/ws/streaming/{session_id}")
    scope = "turn"
    parser = Parser(CLIENT_ADAPTER)

    def task_type(self, session_id: str, query: Mapping[str, str]) -> str:
        return "streaming"

    def max_wait_s(self, settings: Settings) -> float | None:
        return settings.streaming_max_wait_s

    def timeline_reader(self) -> TimelineReader:
        return StreamingTimeline()

    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str:
        return json.dumps(err.to_payload())

    def notice_frame(self, notice: QueueNotice) -> str | None:
        return queue_message(notice).model_dump_json(exclude_none=True)

    def turn_start(self, msg: Any) -> TurnRoute | None:
        if isinstance(msg, Prefill):
            return TurnRoute(history_hash(msg.messages[:-1]))
        return None

    def ends_session(self, msg: Any) -> bool:
        return isinstance(msg, Close)

    def between_turns(self, msg: Any) -> OmnivoxError | None:
        if isinstance(msg, Generate):
            return PrefillRequired("send prefill before generate")
        return None  # a stop with nothing running has nothing to stop


STREAMING = StreamingProtocol()
