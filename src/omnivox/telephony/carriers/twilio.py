"""Twilio Media Streams (bidirectional, ``<Connect><Stream>``), and Twilio's request signatures.

Twilio sends ``connected``, ``start`` (streamSid, callSid, customParameters, mediaFormat),
``media`` (base64 mu-law, 8 kHz, 20 ms), ``dtmf``, ``mark`` (a marker we sent has played, or was
cleared) and ``stop``; we send ``media``, ``mark`` and ``clear``, each with the ``streamSid``.

``X-Twilio-Signature`` is base64(HMAC-SHA1(auth token, URL + each POST parameter's name and value,
sorted by name)); for the WebSocket handshake there are no parameters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from xml.sax.saxutils import quoteattr

from pydantic import Field, TypeAdapter

from omnivox.core.errors import InvalidMessage
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


class Connected(CarrierMessage):
    event: Literal["connected"]


class MediaFormat(CarrierMessage):
    encoding: str
    sampleRate: int = 8000
    channels: int = 1


class StartBody(CarrierMessage):
    streamSid: str = Field(min_length=1, max_length=128)
    callSid: str = Field("", max_length=128)
    accountSid: str = ""
    tracks: list[str] = Field(default_factory=list)
    customParameters: dict[str, str] = Field(default_factory=dict)
    mediaFormat: MediaFormat


class Start(CarrierMessage):
    event: Literal["start"]
    streamSid: str | None = None
    start: StartBody


class Media(CarrierMessage):
    event: Literal["media"]
    streamSid: str | None = None
    media: MediaBody


class Dtmf(CarrierMessage):
    event: Literal["dtmf"]
    streamSid: str | None = None
    dtmf: DtmfBody


class Mark(CarrierMessage):
    event: Literal["mark"]
    streamSid: str | None = None
    mark: MarkBody


class Stop(CarrierMessage):
    event: Literal["stop"]
    streamSid: str | None = None


Message = Annotated[Connected | Start | Media | Dtmf | Mark | Stop, Field(discriminator="event")]


def b64(payload: str) -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessage("media.payload is not base64", param="media.payload") from None


class Twilio(Carrier):
    name = "twilio"
    adapter: TypeAdapter[Any] = TypeAdapter(Message)

    def event(self, message: Any) -> StreamEvent:
        if isinstance(message, Start):
            body = message.start
            return StreamStart(
                stream_id=body.streamSid,
                call_id=body.callSid,
                encoding=encoding_of(body.mediaFormat.encoding),
                parameters=dict(body.customParameters),
                caller=body.customParameters.get("From"),
                callee=body.customParameters.get("To"),
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
        return json.dumps({"event": "media", "streamSid": stream_id, "media": body})

    def mark(self, stream_id: str, name: str) -> str:
        return json.dumps({"event": "mark", "streamSid": stream_id, "mark": {"name": name}})

    def clear(self, stream_id: str) -> str:
        return json.dumps({"event": "clear", "streamSid": stream_id})


TWILIO = Twilio()


def signature(auth_token: str, url: str, params: Mapping[str, str] | None = None) -> str:
    """Twilio's ``X-Twilio-Signature`` for a request to ``url`` with POST ``params``."""
    data = url + "".join(f"{k}{v}" for k, v in sorted((params or {}).items()))
    mac = hmac.new(auth_token.encode(), data.encode(), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode()


def signature_ok(auth_token: str, url: str, params: Mapping[str, str] | None, offered: str | None) -> bool:
    # bytes: compare_digest refuses str with non-ASCII characters (a forged header may hold them)
    return offered is not None and hmac.compare_digest(
        signature(auth_token, url, params).encode(), offered.encode()
    )


def connect_stream(url: str, parameters: Mapping[str, str]) -> str:
    """TwiML that connects the call to a bidirectional stream at ``url``, passing ``parameters``."""
    params = "".join(f"<Parameter name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in parameters.items())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Connect><Stream url={quoteattr(url)}>{params}</Stream></Connect></Response>"
    )
