"""Full-duplex protocol (``/ws/duplex/{session_id}``), the MiniCPM-o demo's message set.

Client -> server: prepare, audio_chunk (about a second of audio, plus video frames in omni mode),
pause, resume, stop, client_diagnostic.
Server -> client: queued, queue_update, queue_done (protocol.control.queue), prepared, one result per unit,
paused, resumed, stopped, timeout, error.

A session holds one worker from ``queue_done`` until it ends (``DUPLEX`` is session-scoped); the
worker runs the unit loop. Task type ``omni_duplex`` when the session id starts with ``omni_`` (or
``?mode=omni``), else ``audio_duplex``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, field_validator

from omnivox.core.config import Settings
from omnivox.core.errors import OmnivoxError
from omnivox.protocol.control.queue import QueueNotice, queue_message
from omnivox.protocol.spec import Parser, WireProtocol
from omnivox.protocol.timelines.duplex import DuplexTimeline
from omnivox.protocol.timelines.reader import TimelineReader
from omnivox.protocol.wire import Msg, known_types

# the rates a client may send audio at (what omnivox.audio.resample converts from)
SAMPLE_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)
OUTPUT_SAMPLE_RATE = 24000

# ---- client -> server


class DuplexConfig(Msg):
    """``prepare.config``: the demo's knobs and defaults. Unknown keys are kept (in ``unknown``)
    so ``prepared`` can say they were ignored; a bad value is an error naming the field."""

    model_config = ConfigDict(extra="allow")

    generate_audio: bool = True
    chunk_ms: int = Field(1000, ge=100, le=5000)
    force_listen_count: int = Field(3, ge=0, le=10_000)  # units that must listen before any speech
    max_new_speak_tokens_per_chunk: int = Field(20, ge=1, le=512)
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float = Field(0.8, gt=0.0, le=1.0)
    top_k: int = Field(20, ge=0, le=10_000)
    listen_prob_scale: float = Field(1.0, ge=0.0, le=1000.0)
    max_kv_tokens: int | None = Field(None, ge=64, le=1_000_000)
    sample_rate: int = 16000
    voice: str | None = Field(None, max_length=200)

    @field_validator("sample_rate")
    @classmethod
    def _known_rate(cls, rate: int) -> int:
        if rate not in SAMPLE_RATES:
            raise ValueError(f"must be one of {', '.join(map(str, SAMPLE_RATES))}")
        return rate

    @property
    def unknown(self) -> list[str]:
        return sorted(self.model_extra or {})

    def known(self) -> dict[str, Any]:
        """The effective settings (defaults filled in, unknown keys left out)."""
        return self.model_dump(mode="json", exclude=set(self.model_extra or {}))


class Prepare(Msg):
    type: Literal["prepare"] = "prepare"
    system_prompt: str = Field("", max_length=100_000)
    config: DuplexConfig = Field(default_factory=DuplexConfig)
    ref_audio_base64: str | None = None  # the model's voice prompt: WAV, or float32 at sample_rate
    tts_ref_audio_base64: str | None = None  # the synthesiser's reference voice (same formats)
    deferred_finalize: bool = True
    record: bool | None = None  # opt out of (or into) session recording


class AudioChunk(Msg):
    type: Literal["audio_chunk"] = "audio_chunk"
    audio_base64: str
    format: Literal["float32", "pcm16"] = "float32"  # little-endian, mono, at config.sample_rate
    frame_base64_list: list[str] | None = Field(None, max_length=64)  # JPEG or PNG (omni)
    force_listen: bool = False


class Pause(Msg):
    type: Literal["pause"] = "pause"
    timeout: float | None = Field(None, gt=0.0)  # seconds before the paused session is released


class Resume(Msg):
    type: Literal["resume"] = "resume"


class Stop(Msg):
    type: Literal["stop"] = "stop"


class ClientDiagnostic(Msg):
    """Figures the client measured (its playback buffer, dropouts); recorded, never answered."""

    type: Literal["client_diagnostic"] = "client_diagnostic"
    metrics: dict[str, Any] = Field(default_factory=dict)


ClientMessage = Annotated[
    Prepare | AudioChunk | Pause | Resume | Stop | ClientDiagnostic, Field(discriminator="type")
]
CLIENT_ADAPTER: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
CLIENT_TYPES = known_types(CLIENT_ADAPTER)

# ---- server -> client


class Prepared(Msg):
    type: Literal["prepared"] = "prepared"
    session_id: str
    mode: Literal["audio", "omni"]
    config: dict[str, Any]  # the effective config
    deferred_finalize: bool
    vision: bool  # omni frames are seen (False: accepted and ignored, see warnings)
    warnings: list[str] = Field(default_factory=list)


class Result(Msg):
    """One unit: the model listened, or said ``text`` (and ``audio_data``)."""

    type: Literal["result"] = "result"
    unit_index: int
    is_listen: bool
    text: str = ""
    audio_data: str | None = None  # base64 PCM16 mono at audio_sample_rate
    audio_sample_rate: int = OUTPUT_SAMPLE_RATE
    end_of_turn: bool = False
    current_time: float  # seconds of the user's audio heard so far
    cost_prefill_ms: float
    cost_generate_ms: float
    cost_finalize_ms: float  # this unit's finalize; with deferred finalize, the previous unit's
    wall_clock_ms: float  # from the unit's chunk arriving to this result being sent
    kv_cache_length: int
    lagging: bool = False  # chunks arrived faster than units finished: several were merged
    merged_chunks: int = 1  # chunks this unit heard


class Paused(Msg):
    type: Literal["paused"] = "paused"
    timeout_s: float  # the session is released if not resumed within this


class Resumed(Msg):
    type: Literal["resumed"] = "resumed"


class Stopped(Msg):
    type: Literal["stopped"] = "stopped"
    session_id: str
    units: int = 0


class Timeout(Msg):
    type: Literal["timeout"] = "timeout"
    reason: str


ServerMessage = Annotated[
    Prepared | Result | Paused | Resumed | Stopped | Timeout, Field(discriminator="type")
]
SERVER_ADAPTER: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)
SERVER_TYPES = known_types(SERVER_ADAPTER) | {"error"}


# ---- the protocol


def mode_of(session_id: str, query: Mapping[str, str]) -> Literal["audio", "omni"]:
    """``?mode=omni|audio`` if given, else omni for ids that start with ``omni_``."""
    mode = query.get("mode")
    if mode == "omni":
        return "omni"
    if mode == "audio":
        return "audio"
    return "omni" if session_id.startswith("omni_") else "audio"


class DuplexProtocol(WireProtocol):
    name = "duplex"
    path = "/ws/duplex/{session_id}"
    worker_paths = ("/ws/duplex/{session_id}",)
    scope = "session"
    parser = Parser(CLIENT_ADAPTER)

    def task_type(self, session_id: str, query: Mapping[str, str]) -> str:
        return f"{mode_of(session_id, query)}_duplex"

    def worker_params(self, headers: Mapping[str, str], query: Mapping[str, str]) -> dict[str, str]:
        mode = query.get("mode")
        return {"mode": mode} if mode in ("omni", "audio") else {}

    def held_bytes(self, settings: Settings) -> int:
        return settings.duplex_queued_bytes

    def timeline_reader(self) -> TimelineReader:
        return DuplexTimeline()

    def error_frame(self, err: OmnivoxError, event_id: str | None = None) -> str:
        return json.dumps(err.to_payload())

    def notice_frame(self, notice: QueueNotice) -> str | None:
        return queue_message(notice).model_dump_json(exclude_none=True)


DUPLEX = DuplexProtocol()
