"""What a session's frames say, as a recording sees it: typed timeline events.

Each wire protocol knows how to read its own frames (``WireProtocol.timeline_reader``); the recorder
(``omnivox.recording``) consumes these events and names no protocol. A reader sees every frame the
relay passes, in order, with its direction (internal worker -> gateway frames included), keeps what
state it needs (the session's audio formats, whether the assistant is speaking), and returns the
events the frame carries. It runs off the event loop (on the recorder's threads) and never raises on
a frame it cannot read: that frame says nothing to the recording.

Audio stays encoded here (this layer sits below ``omnivox.audio``): ``Audio.encoding`` says how the
bytes are to be decoded.
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from omnivox.core.errors import InvalidJson, InvalidMessage
from omnivox.protocol.control.internal import Metrics, is_internal, parse_internal
from omnivox.protocol.wire import load_json

Role = Literal["user", "assistant"]
AudioEncoding = Literal["pcm16", "float32", "wav", "pcmu", "pcma", "ogg_opus"]


@dataclass(frozen=True)
class Audio:
    """A piece of one speaker's audio."""

    role: Role
    data: bytes
    encoding: AudioEncoding
    sample_rate: int  # of the encoded audio (a WAV's own header wins)
    # a continuous encoded stream: stateful codecs (Ogg-Opus) decode within it; a new one starts fresh
    stream: str = ""
    # live: captured (user) or played (assistant) as it arrives; clip: a whole recording sent at once,
    # which ended when it arrived (a streaming turn's spoken question)
    clip: bool = False


@dataclass(frozen=True)
class Image:
    """A picture from the user: a camera frame (omni duplex) or an image sent in a message."""

    data: bytes  # PNG or JPEG, as sent
    kind: Literal["frame", "image"]


@dataclass(frozen=True)
class Text:
    role: Role
    text: str
    final: bool  # the whole text of the turn (a transcript, a typed message); else a delta
    source: Literal["asr", "typed", "reply"] = "reply"


@dataclass(frozen=True)
class TurnStart:
    role: Role
    audio_ms: float | None = None  # where in the user's audio stream, when the protocol says
    ref: str | None = None  # the protocol's id of the turn (a realtime response id)


@dataclass(frozen=True)
class TurnEnd:
    role: Role
    audio_ms: float | None = None
    status: str = "completed"  # completed | cancelled | stopped | failed | interrupted


@dataclass(frozen=True)
class AssistantCutOff:
    """The user cut the assistant off: what the assistant had queued beyond this moment was not heard."""

    reason: str = "turn_detected"


@dataclass(frozen=True)
class ErrorEvent:
    code: str
    message: str = ""


@dataclass(frozen=True)
class TurnFigures:
    """Latency and cost figures of the current turn (seconds, counts, flags)."""

    values: dict[str, float | int | bool]
    next_turn: bool = False  # about the reply still to come (else the one under way or just ended)


@dataclass(frozen=True)
class TurnStages:
    """The breakdown of the reply just ended: when it passed each stage, in seconds after the end of
    the user's speech (``agent.breakdown``)."""

    stages: dict[str, float]


@dataclass(frozen=True)
class Marker:
    """Something that happened in the session that is neither speech nor text (pause, stop, commit)."""

    name: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordChoice:
    """The client asked for its session to be recorded (True) or not (False)."""

    record: bool


@dataclass(frozen=True)
class Config:
    """The session's configuration as the protocol states it (kept in the recording's meta)."""

    values: dict[str, Any]


TimelineEvent = (
    Audio
    | Image
    | Text
    | TurnStart
    | TurnEnd
    | AssistantCutOff
    | ErrorEvent
    | TurnFigures
    | TurnStages
    | Marker
)
Event = TimelineEvent | RecordChoice | Config

# what an internal metrics frame says about the current turn, under the names the timeline uses
_FIGURES = ("voice_to_voice_s", "llm_ttft_s", "tts_ttfa_s", "ttft_s")


class TimelineReader(ABC):
    """Reads one session's frames in order. One instance per session (it keeps state)."""

    def read(self, from_client: bool, data: str | bytes) -> list[Event]:
        """The events ``data`` carries (none for a frame this reader cannot make sense of)."""
        if not isinstance(data, str):
            return []
        if not from_client and is_internal(data):
            return _internal(data)
        try:
            msg = load_json(data)  # a frame nested too deep, or with a lone surrogate, says nothing here
        except (InvalidJson, InvalidMessage):
            return []
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            return []
        try:
            return self.client(msg["type"], msg) if from_client else self.server(msg["type"], msg)
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error):
            return []  # a frame of the right type but the wrong shape: the worker refused it too

    @abstractmethod
    def client(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        """Events of a client -> worker message of type ``kind``."""

    @abstractmethod
    def server(self, kind: str, msg: dict[str, Any]) -> list[Event]:
        """Events of a worker -> client message of type ``kind``."""


def _internal(frame: str) -> list[Event]:
    report = parse_internal(frame)
    if not isinstance(report, Metrics):
        return []
    values: dict[str, float | int | bool] = {
        name: value for name in _FIGURES if (value := getattr(report, name)) is not None
    }
    events: list[Event] = [TurnFigures(values)] if values else []
    if report.stages_s:
        events.append(TurnStages(dict(report.stages_s)))
    return events


def b64(text: object) -> bytes:
    """Base64 text -> bytes (``binascii.Error`` or ``TypeError`` on anything else)."""
    if not isinstance(text, str):
        raise TypeError("not base64 text")
    return base64.b64decode(text, validate=True)  # as strict as the workers are


def record_choice(value: object) -> list[Event]:
    """A ``record`` field: an event only when the client said yes or no."""
    return [RecordChoice(value)] if isinstance(value, bool) else []


def data_url_bytes(url: object) -> bytes | None:
    """The bytes of a ``data:image/...;base64,...`` URL (None for any other URL)."""
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    return b64(url.split(";base64,", 1)[1])


def dict_field(msg: dict[str, Any], key: str) -> dict[str, Any]:
    """``msg[key]`` when it is an object, else an empty one (a frame may carry anything there)."""
    value = msg.get(key)
    return value if isinstance(value, dict) else {}


def error_event(msg: dict[str, Any]) -> list[Event]:
    """An ``error`` message in either shape: ``{code, message}`` or OpenAI's ``{error: {code, message}}``."""
    body = dict_field(msg, "error") or msg
    code = body.get("code") or body.get("type") or "error"
    return [ErrorEvent(str(code), str(body.get("message") or ""))]
