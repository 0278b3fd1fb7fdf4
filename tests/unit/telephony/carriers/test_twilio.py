"""Twilio Media Streams: every message Twilio documents, read as stream events; what we send; TwiML;
request signatures."""

from __future__ import annotations

import base64
import json
from xml.etree import ElementTree

import pytest

from omnivox.core.errors import InvalidMessage
from omnivox.telephony.carriers import twilio
from omnivox.telephony.carriers.base import (
    StreamDtmf,
    StreamMark,
    StreamMedia,
    StreamOther,
    StreamStart,
    StreamStop,
)

T = twilio.TWILIO
SID = "MZ18ad3ab5a668481ce02b83e7395059f0"

# the messages as Twilio's Media Streams documentation shows them
CONNECTED = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
START = {
    "event": "start",
    "sequenceNumber": "1",
    "start": {
        "accountSid": "AC0123456789abcdef0123456789abcdef",
        "streamSid": SID,
        "callSid": "CA0123456789abcdef0123456789abcdef",
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        "customParameters": {"FirstName": "Jane", "From": "+15550100", "To": "+15550199"},
    },
    "streamSid": SID,
}
MEDIA = {
    "event": "media",
    "sequenceNumber": "3",
    "media": {"track": "inbound", "chunk": "1", "timestamp": "5", "payload": "no+JhoaJjpw="},
    "streamSid": SID,
}
DTMF = {
    "event": "dtmf",
    "streamSid": SID,
    "sequenceNumber": "5",
    "dtmf": {"track": "inbound_track", "digit": "1"},
}
MARK = {"event": "mark", "sequenceNumber": "4", "streamSid": SID, "mark": {"name": "my label"}}
STOP = {
    "event": "stop",
    "sequenceNumber": "5",
    "stop": {"accountSid": "AC0123456789abcdef0123456789abcdef", "callSid": "CA0123456789abcdef"},
    "streamSid": SID,
}


def test_every_documented_message_reads_as_its_event() -> None:
    assert T.parse(json.dumps(CONNECTED)) == StreamOther()
    assert T.parse(json.dumps(START)) == StreamStart(
        stream_id=SID,
        call_id="CA0123456789abcdef0123456789abcdef",
        encoding="audio/pcmu",
        parameters={"FirstName": "Jane", "From": "+15550100", "To": "+15550199"},
        caller="+15550100",
        callee="+15550199",
    )
    assert T.parse(json.dumps(MEDIA)) == StreamMedia(base64.b64decode("no+JhoaJjpw="))
    assert T.parse(json.dumps(DTMF)) == StreamDtmf("1")
    assert T.parse(json.dumps(MARK)) == StreamMark("my label")
    assert T.parse(json.dumps(STOP)) == StreamStop()


def test_bytes_frames_read_as_text_frames() -> None:
    assert T.parse(json.dumps(MARK).encode()) == StreamMark("my label")


def test_the_outbound_track_is_not_the_callers_audio() -> None:
    outbound = {**MEDIA, "media": {**MEDIA["media"], "track": "outbound"}}  # type: ignore[dict-item]
    assert T.parse(json.dumps(outbound)) == StreamOther()


def test_a_start_without_parameters_has_no_caller() -> None:
    start = json.loads(json.dumps(START))
    del start["start"]["customParameters"]
    event = T.parse(json.dumps(start))
    assert isinstance(event, StreamStart) and event.parameters == {} and event.caller is None


@pytest.mark.parametrize(
    ("change", "param"),
    [
        (lambda m: m["start"].pop("streamSid"), "streamSid"),
        (lambda m: m["start"].__setitem__("streamSid", ""), "streamSid"),
        (lambda m: m["start"].__setitem__("streamSid", "M" * 129), "streamSid"),
        (lambda m: m["start"].pop("mediaFormat"), "mediaFormat"),
        (lambda m: m["start"].__setitem__("customParameters", {"a": 1}), "a"),
        (lambda m: m["start"]["mediaFormat"].__setitem__("encoding", "audio/x-l16"), None),
    ],
)
def test_a_start_twilio_never_sends_is_refused_with_where(change, param: str | None) -> None:  # type: ignore[no-untyped-def]
    start = json.loads(json.dumps(START))
    change(start)
    with pytest.raises(InvalidMessage) as err:
        T.parse(json.dumps(start))
    assert err.value.code == "invalid_message"
    if param is not None:
        assert str(err.value.details["param"]).endswith(param)


def test_what_we_send_is_what_twilio_documents() -> None:
    media = json.loads(T.media(SID, b"\x00\xff", "audio/pcmu"))
    assert media == {"event": "media", "streamSid": SID, "media": {"payload": "AP8="}}
    assert json.loads(T.mark(SID, "omnivox-1")) == {
        "event": "mark",
        "streamSid": SID,
        "mark": {"name": "omnivox-1"},
    }
    assert json.loads(T.clear(SID)) == {"event": "clear", "streamSid": SID}


def test_twiml_escapes_what_it_is_given() -> None:
    xml = twilio.connect_stream('wss://h/x?a=1&b="2"', {"from": "+1 <555>", "q": "it's & that"})
    stream = ElementTree.fromstring(xml.split("?>", 1)[1]).find("Connect/Stream")
    assert stream is not None and stream.get("url") == 'wss://h/x?a=1&b="2"'
    assert {p.get("name"): p.get("value") for p in stream.findall("Parameter")} == {
        "from": "+1 <555>",
        "q": "it's & that",
    }


def test_a_signature_with_any_characters_is_refused_not_an_error() -> None:
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    good = twilio.signature("12345", url, {"a": "b"})
    assert twilio.signature_ok("12345", url, {"a": "b"}, good)
    assert not twilio.signature_ok("12345", url, {"a": "b"}, good + "é")
    assert not twilio.signature_ok("12345", url, {"a": "b"}, "")
    assert not twilio.signature_ok("12345", url + "&x=1", {"a": "b"}, good)
