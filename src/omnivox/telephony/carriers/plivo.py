"""Plivo audio streams (``<Stream bidirectional="true">``): ``start`` (streamId, callId,
mediaFormat), ``media``, ``dtmf``, ``playedStream`` (a checkpoint has played) and
``clearedAudio`` in; ``playAudio``, ``checkpoint`` and ``clearAudio`` out. Plivo sends no stop
message: the stream ends when the socket closes."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from omnivox.telephony.carriers.base import (
    Carrier,
    DtmfBody,
    MediaBody,
    StreamDtmf,
    StreamEvent,
    StreamMark,
    StreamMedia,
    StreamOther,
    StreamStart,
    StreamStop,
    encoding_of,
)
from omnivox.telephony.carriers.base import Message as CarrierMessage
from omnivox.telephony.carriers.twilio import b64


class MediaFormat(CarrierMessage):
    encoding: str
    sampleRate: int = 8000


class StartBody(CarrierMessage):
    callId: str = Field("", max_length=128)
    streamId: str = Field(min_length=1, max_length=128)
    mediaFormat: MediaFormat


class Start(CarrierMessage):
    event: Literal["start"]
    start: StartBody
    extra_headers: str | None = None


class Media(CarrierMessage):
    event: Literal["media"]
    media: MediaBody


class Dtmf(CarrierMessage):
    event: Literal["dtmf"]
    dtmf: DtmfBody


class PlayedStream(CarrierMessage):
    event: Literal["playedStream"]
    name: str


class ClearedAudio(CarrierMessage):
    event: Literal["clearedAudio"]


class Stop(CarrierMessage):
    event: Literal["stop"]


Message = Annotated[Start | Media | Dtmf | PlayedStream | ClearedAudio | Stop, Field(discriminator="event")]


def _headers(extra: str | None) -> dict[str, str]:
    pairs = (part.partition("=") for part in (extra or "").replace(",", ";").split(";") if "=" in part)
    return {k.strip(): v.strip() for k, _, v in pairs}


class Plivo(Carrier):
    name = "plivo"
    adapter: TypeAdapter[Any] = TypeAdapter(Message)

    def event(self, message: Any) -> StreamEvent:
        if isinstance(message, Start):
            body = message.start
            return StreamStart(
                stream_id=body.streamId,
                call_id=body.callId,
                encoding=encoding_of(body.mediaFormat.encoding),
                parameters=_headers(message.extra_headers),
            )
        if isinstance(message, Media):
            return (
                StreamMedia(b64(message.media.payload)) if message.media.track == "inbound" else StreamOther()
            )
        if isinstance(message, Dtmf):
            return StreamDtmf(message.dtmf.digit)
        if isinstance(message, PlayedStream):
            return StreamMark(message.name)
        if isinstance(message, Stop):
            return StreamStop()
        return StreamOther()

    def media(self, stream_id: str, payload: bytes, encoding: str) -> str:
        kind = "audio/x-mulaw" if encoding == "audio/pcmu" else "audio/x-alaw"
        body = {"contentType": kind, "sampleRate": 8000, "payload": base64.b64encode(payload).decode()}
        return json.dumps({"event": "playAudio", "media": body})

    def mark(self, stream_id: str, name: str) -> str:
        return json.dumps({"event": "checkpoint", "streamId": stream_id, "name": name})

    def clear(self, stream_id: str) -> str:
        return json.dumps({"event": "clearAudio", "streamId": stream_id})


PLIVO = Plivo()
