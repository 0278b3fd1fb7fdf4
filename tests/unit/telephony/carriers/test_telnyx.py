"""Telnyx's Ed25519 request signatures: ``{timestamp}|{body}`` under the account's key pair."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from omnivox.core.errors import InvalidMessage
from omnivox.telephony.carriers import base as stream
from omnivox.telephony.carriers import telnyx

NOW = 1_800_000_000


def keys() -> tuple[Ed25519PrivateKey, str]:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, base64.b64encode(public).decode()


def signed(private: Ed25519PrivateKey, timestamp: int, body: bytes = b"") -> dict[str, str]:
    signature = private.sign(f"{timestamp}|".encode() + body)
    return {
        "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
        "telnyx-timestamp": str(timestamp),
    }


def test_a_fresh_signature_by_the_account_key_is_taken() -> None:
    private, public = keys()
    assert telnyx.signature_ok(public, signed(private, NOW), now=NOW)
    assert telnyx.signature_ok(public, signed(private, NOW, b'{"a":1}'), b'{"a":1}', now=NOW + 10)


def test_other_keys_bodies_stale_or_missing_headers_are_refused() -> None:
    private, public = keys()
    other, _ = keys()
    assert not telnyx.signature_ok(public, signed(other, NOW), now=NOW)
    assert not telnyx.signature_ok(public, signed(private, NOW, b"x"), b"y", now=NOW)
    assert not telnyx.signature_ok(public, signed(private, NOW), now=NOW + 301)  # a replay
    headers = signed(private, NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-timestamp": str(NOW + 1)}, now=NOW)
    assert not telnyx.signature_ok(public, {"telnyx-timestamp": str(NOW)}, now=NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-signature-ed25519": "%%%"}, now=NOW)
    assert not telnyx.signature_ok(public, {**headers, "telnyx-timestamp": "soon"}, now=NOW)
    assert not telnyx.signature_ok("bm90IGEga2V5", headers, now=NOW)  # a public key of 9 bytes


# ---- the media stream's messages, as Telnyx's media streaming documentation shows them

STREAM = "32de0dea-53cb-4b21-89a4-9d4cbb2a3e33"
CALL = "v3:u5OAKGEPT3Dx8SZSSDRWEMdNH2OripQhO"


def test_every_documented_message_reads_as_its_event() -> None:
    T = telnyx.TELNYX
    assert T.parse(json.dumps({"event": "connected", "version": "1.0.0"})) == stream.StreamOther()
    start = {
        "event": "start",
        "sequence_number": "1",
        "start": {
            "user_id": "3e6f995f-85f7-4705-9741-53b116d28237",
            "call_control_id": CALL,
            "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
            "from": "+13122010094",
            "to": "+13122010095",
            "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
        },
        "stream_id": STREAM,
    }
    assert T.parse(json.dumps(start)) == stream.StreamStart(
        STREAM,
        CALL,
        "audio/pcmu",
        {"client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d"},
        "+13122010094",
        "+13122010095",
    )
    media = {
        "event": "media",
        "sequence_number": "4",
        "media": {"track": "inbound", "chunk": "2", "timestamp": "5", "payload": "AAE="},
        "stream_id": STREAM,
    }
    assert T.parse(json.dumps(media)) == stream.StreamMedia(b"\x00\x01")
    media["media"]["track"] = "outbound"  # type: ignore[index]
    assert T.parse(json.dumps(media)) == stream.StreamOther()
    dtmf = {
        "event": "dtmf",
        "stream_id": STREAM,
        "occurred_at": "2022-05-12T15:09:21Z",
        "dtmf": {"digit": "*"},
    }
    assert T.parse(json.dumps(dtmf)) == stream.StreamDtmf("*")
    assert T.parse(
        json.dumps({"event": "mark", "stream_id": STREAM, "mark": {"name": "m7"}})
    ) == stream.StreamMark("m7")
    stop = {"event": "stop", "sequence_number": "5", "stop": {"call_control_id": CALL}, "stream_id": STREAM}
    assert T.parse(json.dumps(stop)) == stream.StreamStop()
    error = {"event": "error", "payload": {"code": 100002, "title": "unknown_error", "detail": "x"}}
    assert T.parse(json.dumps(error)) == stream.StreamOther()


def test_a_start_without_a_stream_id_or_with_another_codec_is_refused() -> None:
    start = {"event": "start", "start": {"media_format": {"encoding": "PCMA"}}, "stream_id": STREAM}
    event = telnyx.TELNYX.parse(json.dumps(start))
    assert isinstance(event, stream.StreamStart) and event.encoding == "audio/pcma" and event.parameters == {}
    for bad in ({**start, "stream_id": ""}, {**start, "start": {"media_format": {"encoding": "G722"}}}):
        with pytest.raises(InvalidMessage):
            telnyx.TELNYX.parse(json.dumps(bad))


def test_what_we_send_carries_the_stream_id() -> None:
    T = telnyx.TELNYX
    assert json.loads(T.media(STREAM, b"\xff", "audio/pcmu")) == {
        "event": "media",
        "stream_id": STREAM,
        "media": {"payload": "/w=="},
    }
    assert json.loads(T.mark(STREAM, "a")) == {"event": "mark", "stream_id": STREAM, "mark": {"name": "a"}}
    assert json.loads(T.clear(STREAM)) == {"event": "clear", "stream_id": STREAM}


def test_a_timestamp_of_other_digits_is_refused_not_an_error() -> None:
    private, public = keys()
    headers = signed(private, NOW)
    for stamp in ("²", "١٨٠٠٠٠٠٠٠٠", "-1", " 1800000000"):
        assert not telnyx.signature_ok(public, {**headers, "telnyx-timestamp": stamp}, now=NOW)
