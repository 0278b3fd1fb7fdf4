"""What every carrier's media stream says, in words of its own: the events a call reacts to and
the three things omnivox sends back (audio, a playback marker, clear).

A carrier plays what it is sent in order and echoes a marker (Twilio's and Telnyx's ``mark``,
Plivo's ``checkpoint``/``playedStream``) once the audio before it has played: the only record of
what the caller actually heard. After ``clear`` it drops what it had not played (and echoes the
markers it dropped, which must not count as played).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from omnivox.core.errors import InvalidMessage, MessageTooLarge
from omnivox.protocol.wire import load_json

MAX_FRAME_BYTES = 256 * 1024  # a carrier's media frame is a few hundred bytes


class Message(BaseModel):
    """A carrier's message: fields omnivox does not read are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class MediaBody(Message):
    payload: str
    track: str = "inbound"


class DtmfBody(Message):
    digit: str = Field(min_length=1, max_length=1)


class MarkBody(Message):
    name: str


@dataclass(frozen=True)
class StreamStart:
    stream_id: str
    call_id: str  # the carrier's call
    encoding: str  # audio/pcmu or audio/pcma: what the stream carries both ways
    parameters: dict[str, str] = field(default_factory=dict)  # the application's own (TwiML <Parameter>)
    caller: str | None = None
    callee: str | None = None


@dataclass(frozen=True)
class StreamMedia:
    payload: bytes  # G.711, as the stream's encoding says


@dataclass(frozen=True)
class StreamDtmf:
    digit: str


@dataclass(frozen=True)
class StreamMark:
    name: str  # the marker's audio has played (or was cleared)


@dataclass(frozen=True)
class StreamStop:
    pass


@dataclass(frozen=True)
class StreamOther:
    """A message that needs nothing (``connected``, a cleared-audio confirmation, an outbound track)."""


StreamEvent = StreamStart | StreamMedia | StreamDtmf | StreamMark | StreamStop | StreamOther

ENCODINGS = {
    "audio/x-mulaw": "audio/pcmu",
    "pcmu": "audio/pcmu",
    "audio/x-alaw": "audio/pcma",
    "pcma": "audio/pcma",
}


def encoding_of(name: str) -> str:
    """The session's format for a carrier's encoding name; raises ``InvalidMessage``."""
    found = ENCODINGS.get(name.lower().split(";")[0].strip())
    if found is None:
        raise InvalidMessage(f"the stream's encoding {name!r} is not G.711 (mu-law or A-law)")
    return found


class Carrier(ABC):
    name: str
    adapter: TypeAdapter[Any]  # the union of the messages it sends

    def parse(self, raw: str | bytes) -> StreamEvent:
        """One message from the carrier; raises ``InvalidJson``, ``InvalidMessage``."""
        if len(raw) > MAX_FRAME_BYTES:
            raise MessageTooLarge(f"a {self.name} message larger than {MAX_FRAME_BYTES} bytes")
        # the protocol's reader: JSON nested thousands deep or holding lone surrogates is refused
        # (json.loads alone raises RecursionError for the first)
        data = load_json(raw)
        try:
            message = self.adapter.validate_python(data)
        except ValidationError as exc:
            where = ".".join(str(p) for p in exc.errors()[0]["loc"])
            raise InvalidMessage(f"a {self.name} message that does not fit its schema", param=where) from None
        return self.event(message)

    @abstractmethod
    def event(self, message: Any) -> StreamEvent:
        """What a parsed message means."""

    @abstractmethod
    def media(self, stream_id: str, payload: bytes, encoding: str) -> str: ...

    @abstractmethod
    def mark(self, stream_id: str, name: str) -> str: ...

    @abstractmethod
    def clear(self, stream_id: str) -> str: ...
