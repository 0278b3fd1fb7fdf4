"""Telnyx media streaming (``stream_bidirectional_mode: rtp``): ``connected``, ``start``
(stream_id, call_control_id, media_format), ``media``, ``dtmf``, ``mark``, ``stop`` in; ``media``,
``mark`` and ``clear`` out (each with the ``stream_id``)."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from omnivox.telephony.carriers.base import (
    Carrier,
    DtmfBody,
    MarkBody,
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


class Connected(CarrierMessage):
    event: Literal["connected"]


class MediaFormat(CarrierMessage):
    encoding: str
    sample_rate: int = 8000
    channels: int = 1


class StartBody(CarrierMessage):
    call_control_id: str = Field("", max_length=256)
    media_format: MediaFormat
    client_state: str | None = None
    to: str | None = None
    from_: str | None = Field(None, alias="from")


class Start(CarrierMessage):
    event: Literal["start"]
    stream_id: str = Field(min_length=1, max_length=128)
    start: StartBody


class Media(CarrierMessage):
    event: Literal["media"]
    media: MediaBody


class Dtmf(CarrierMessage):
    event: Literal["dtmf"]
    dtmf: DtmfBody


class Mark(CarrierMessage):
    event: Literal["mark"]
    mark: MarkBody


class Stop(CarrierMessage):
    event: Literal["stop"]


class Error(CarrierMessage):
    event: Literal["error"]


Message = Annotated[Connected | Start | Media | Dtmf | Mark | Stop | Error, Field(discriminator="event")]


class Telnyx(Carrier):
    name = "telnyx"
    adapter: TypeAdapter[Any] = TypeAdapter(Message)

    def event(self, message: Any) -> StreamEvent:
        if isinstance(message, Start):
            body = message.start
            return StreamStart(
                stream_id=message.stream_id,
                call_id=body.call_control_id,
                encoding=encoding_of(body.media_format.encoding),
                parameters={"client_state": body.client_state} if body.client_state else {},
                caller=body.from_,
                callee=body.to,
            )
        if isinstance(message, Media):
            return (
                StreamMedia(b64(message.media.payload)) if message.media.track == "inbound" else StreamOther()
            )
        if isinstance(message, Dtmf):
            return StreamDtmf(message.dtmf.digit)
        if isinstance(message, Mark):
            return StreamMark(message.mark.name)
        if isinstance(message, Stop):
            return StreamStop()
        return StreamOther()

    def media(self, stream_id: str, payload: bytes, encoding: str) -> str:
        body = {"payload": base64.b64encode(payload).decode()}
        return json.dumps({"event": "media", "stream_id": stream_id, "media": body})

    def mark(self, stream_id: str, name: str) -> str:
        return json.dumps({"event": "mark", "stream_id": stream_id, "mark": {"name": name}})

    def clear(self, stream_id: str) -> str:
        return json.dumps({"event": "clear", "stream_id": stream_id})


TELNYX = Telnyx()
