"""Plivo's V3 request signatures: HMAC-SHA256 of ``{url}.{nonce}`` under the auth token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from omnivox.core.errors import InvalidMessage
from omnivox.telephony.carriers import plivo
from omnivox.telephony.carriers.base import StreamDtmf, StreamMark, StreamMedia, StreamOther, StreamStart

TOKEN = "MAauthtoken"


def mac(data: str, token: str = TOKEN) -> str:
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha256).digest()).decode()


def test_what_is_signed_follows_plivos_sdk() -> None:
    assert plivo.signed_url("GET", "wss://h.example/telephony/plivo/stream") == (
        "wss://h.example/telephony/plivo/stream"
    )
    assert plivo.signed_url("GET", "https://h/p?b=2&a=1&a=0") == "https://h/p?a=0&a=1&b=2"
    assert plivo.signed_url("POST", "https://h/p", {"To": "1", "From": "2"}) == "https://h/p?From2To1"
    assert plivo.signed_url("POST", "https://h/p?x=1", {"To": "1"}) == "https://h/p?x=1.To1"
    assert plivo.signed_url("POST", "https://h/p") == "https://h/p"


def test_a_signed_handshake_is_taken_and_anything_else_refused() -> None:
    url = "wss://h.example/telephony/plivo/stream"
    good = {"x-plivo-signature-v3": mac(f"{url}.n1"), "x-plivo-signature-v3-nonce": "n1"}
    assert plivo.signature_ok(TOKEN, "GET", url, good)
    rotating = {**good, "x-plivo-signature-v3": f"{mac(f'{url}.n1', 'old')}, {mac(f'{url}.n1')}"}
    assert plivo.signature_ok(TOKEN, "GET", url, rotating)
    assert not plivo.signature_ok("other", "GET", url, good)
    assert not plivo.signature_ok(TOKEN, "GET", url + "x", good)
    assert not plivo.signature_ok(TOKEN, "GET", url, {**good, "x-plivo-signature-v3-nonce": "n2"})
    assert not plivo.signature_ok(TOKEN, "GET", url, {"x-plivo-signature-v3": good["x-plivo-signature-v3"]})
    assert not plivo.signature_ok(TOKEN, "GET", url, {})


# ---- the audio stream's messages, as Plivo's stream event protocol shows them

STREAM = "87654321-4321-4321-4321-cba987654321"
CALL = "12345678-1234-1234-1234-123456789abc"


def test_every_documented_message_reads_as_its_event() -> None:
    P = plivo.PLIVO
    start = {
        "event": "start",
        "sequenceNumber": 1,
        "start": {
            "callId": CALL,
            "streamId": STREAM,
            "accountId": "MAXXXXXXXXXXXXXXXXXX",
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        },
        "extra_headers": "userId=12345;sessionId=abc-xyz",
    }
    assert P.parse(json.dumps(start)) == StreamStart(
        STREAM, CALL, "audio/pcmu", {"userId": "12345", "sessionId": "abc-xyz"}
    )
    media = {
        "event": "media",
        "sequenceNumber": 42,
        "streamId": STREAM,
        "media": {"track": "inbound", "timestamp": "1705312200000", "chunk": 41, "payload": "//8="},
        "extra_headers": "userId=12345;sessionId=abc-xyz",
    }
    assert P.parse(json.dumps(media)) == StreamMedia(b"\xff\xff")
    dtmf = {"event": "dtmf", "streamId": STREAM, "dtmf": {"track": "inbound", "digit": "5", "timestamp": "1"}}
    assert P.parse(json.dumps(dtmf)) == StreamDtmf("5")
    played = {"event": "playedStream", "streamId": STREAM, "name": "customer greeting audio"}
    assert P.parse(json.dumps(played)) == StreamMark("customer greeting audio")
    assert (
        P.parse(json.dumps({"event": "clearedAudio", "streamId": STREAM, "sequenceNumber": 9}))
        == StreamOther()
    )


@pytest.mark.parametrize(
    ("extra", "parameters"),
    [
        (None, {}),
        ("", {}),
        ("test1=12,test2=123", {"test1": "12", "test2": "123"}),  # the <Stream extraHeaders> form
        ("a=1; b = 2 ;;junk", {"a": "1", "b": "2"}),
        ("k=v=w", {"k": "v=w"}),
    ],
)
def test_extra_headers_become_the_streams_parameters(extra: str | None, parameters: dict[str, str]) -> None:
    start = {"event": "start", "start": {"streamId": STREAM, "mediaFormat": {"encoding": "audio/x-mulaw"}}}
    event = plivo.PLIVO.parse(json.dumps({**start, "extra_headers": extra}))
    assert isinstance(event, StreamStart) and event.parameters == parameters and event.call_id == ""


def test_a_start_plivo_cannot_stream_to_us_is_refused() -> None:
    l16 = {"event": "start", "start": {"streamId": STREAM, "mediaFormat": {"encoding": "audio/x-l16"}}}
    for bad in (l16, {"event": "start", "start": {"streamId": STREAM}}, {"event": "start", "start": {}}):
        with pytest.raises(InvalidMessage):
            plivo.PLIVO.parse(json.dumps(bad))


def test_what_we_send_is_what_plivo_documents() -> None:
    P = plivo.PLIVO
    play = json.loads(P.media(STREAM, b"\xd5", "audio/pcma"))
    assert play == {
        "event": "playAudio",
        "media": {"contentType": "audio/x-alaw", "sampleRate": 8000, "payload": "1Q=="},
    }
    assert json.loads(P.media(STREAM, b"\xff", "audio/pcmu"))["media"]["contentType"] == "audio/x-mulaw"
    assert json.loads(P.mark(STREAM, "n")) == {"event": "checkpoint", "streamId": STREAM, "name": "n"}
    assert json.loads(P.clear(STREAM)) == {"event": "clearAudio", "streamId": STREAM}


def test_a_signature_with_any_characters_is_refused_not_an_error() -> None:
    url = "wss://h.example/telephony/plivo/stream"
    headers = {"x-plivo-signature-v3": mac(f"{url}.n1") + "é", "x-plivo-signature-v3-nonce": "n1"}
    assert not plivo.signature_ok(TOKEN, "GET", url, headers)
    assert not plivo.signature_ok(TOKEN, "GET", url, {**headers, "x-plivo-signature-v3": "é, ü"})
