"""Telnyx media streaming (``stream_bidirectional_mode: rtp``): ``connected``, ``start``
(stream_id, call_control_id, media_format), ``media``, ``dtmf``, ``mark``, ``stop`` in; ``media``,
``mark`` and ``clear`` out (each with the ``stream_id``).

Telnyx signs its requests with Ed25519: ``telnyx-signature-ed25519`` is the base64 signature of
``{telnyx-timestamp}|{body}`` under the account's key pair, whose public key (base64, 32 bytes)
the portal shows; a timestamp more than ``SIGNATURE_TOLERANCE_S`` away is refused (a replay).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
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


SIGNATURE_HEADER = "telnyx-signature-ed25519"
TIMESTAMP_HEADER = "telnyx-timestamp"
SIGNATURE_TOLERANCE_S = 300


def signature_ok(
    public_key: str, headers: Mapping[str, str], body: bytes = b"", now: float | None = None
) -> bool:
    """Whether ``headers`` carry Telnyx's valid, fresh signature of ``body`` (a WebSocket
    handshake has none: the signature covers ``{timestamp}|``)."""
    signature, timestamp = headers.get(SIGNATURE_HEADER), headers.get(TIMESTAMP_HEADER)
    if not signature or not timestamp or not (timestamp.isascii() and timestamp.isdigit()):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > SIGNATURE_TOLERANCE_S:
        return False
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(base64.b64decode(signature, validate=True), timestamp.encode() + b"|" + body)
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True
