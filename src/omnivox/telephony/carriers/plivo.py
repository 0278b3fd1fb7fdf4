"""Plivo audio streams (``<Stream bidirectional="true">``): ``start`` (streamId, callId,
mediaFormat), ``media``, ``dtmf``, ``playedStream`` (a checkpoint has played) and
``clearedAudio`` in; ``playAudio``, ``checkpoint`` and ``clearAudio`` out. Plivo sends no stop
message: the stream ends when the socket closes.

Plivo signs its requests (``X-Plivo-Signature-V3``, with ``X-Plivo-Signature-V3-Nonce``): the
base64 HMAC-SHA256, under the account's auth token, of ``{url}.{nonce}``, where the URL has no
query for a GET without parameters, else its parameters sorted (``?a=1&b=2``), and a POST's
parameters follow as ``name`` + ``value`` pairs sorted by name. The header may hold several
signatures, comma-separated (one per token while a token is being rotated).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

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


SIGNATURE_HEADER = "x-plivo-signature-v3"
NONCE_HEADER = "x-plivo-signature-v3-nonce"


def signed_url(method: str, url: str, params: Mapping[str, str] | None = None) -> str:
    """What Plivo signs of a request (``url`` as Plivo requested it)."""
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}{parts.path}"
    query: dict[str, list[str]] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(k, []).append(v)
    post = dict(params or {}) if method.upper() == "POST" else {}
    if method.upper() != "POST":
        for k, v in (params or {}).items():
            query.setdefault(k, []).append(v)
    sorted_query = "&".join(f"{k}={v}" for k in sorted(query) for v in sorted(query[k]))
    if not post:
        return f"{base}?{sorted_query}" if sorted_query else base
    tail = "".join(f"{k}{post[k]}" for k in sorted(post))
    return f"{base}?{sorted_query}.{tail}" if sorted_query else f"{base}?{tail}"


def signature_v3(
    auth_token: str, method: str, url: str, nonce: str, params: Mapping[str, str] | None = None
) -> str:
    data = f"{signed_url(method, url, params)}.{nonce}".encode()
    return base64.b64encode(hmac.new(auth_token.encode(), data, hashlib.sha256).digest()).decode()


def signature_ok(
    auth_token: str,
    method: str,
    url: str,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None = None,
) -> bool:
    """Whether ``headers`` carry Plivo's valid V3 signature of the request."""
    offered, nonce = headers.get(SIGNATURE_HEADER), headers.get(NONCE_HEADER)
    if not offered or not nonce:
        return False
    expected = signature_v3(auth_token, method, url, nonce, params)
    # bytes: compare_digest refuses str with non-ASCII characters (a forged header may hold them)
    return any(hmac.compare_digest(expected.encode(), s.strip().encode()) for s in offered.split(","))
