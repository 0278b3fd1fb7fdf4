import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnivox.core.errors import OmnivoxError
from omnivox.telephony.carriers import CARRIERS
from omnivox.telephony.carriers.base import StreamDtmf, StreamMark, StreamMedia, StreamStart, StreamStop

TWILIO = CARRIERS["twilio"]


def test_twilio_messages_read_as_stream_events():
    start = {
        "event": "start",
        "start": {
            "streamSid": "MZ1",
            "callSid": "CA1",
            "customParameters": {"To": "+1555"},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        },
    }
    assert TWILIO.parse(json.dumps(start)) == StreamStart(
        "MZ1", "CA1", "audio/pcmu", {"To": "+1555"}, None, "+1555"
    )
    assert TWILIO.parse('{"event":"media","media":{"payload":"AAE="}}') == StreamMedia(b"\x00\x01")
    assert TWILIO.parse('{"event":"dtmf","dtmf":{"digit":"#"}}') == StreamDtmf("#")
    assert TWILIO.parse('{"event":"mark","mark":{"name":"m1"}}') == StreamMark("m1")
    assert TWILIO.parse('{"event":"stop","streamSid":"MZ1"}') == StreamStop()
    assert json.loads(TWILIO.clear("MZ1")) == {"event": "clear", "streamSid": "MZ1"}
    assert json.loads(TWILIO.mark("MZ1", "a"))["mark"] == {"name": "a"}


@pytest.mark.parametrize(
    "raw",
    [
        "nope",
        "[]",
        '{"event":"media","media":{"payload":"***"}}',
        '{"event":"dtmf","dtmf":{"digit":"12"}}',
        '{"event":"start","start":{"streamSid":"MZ","mediaFormat":{"encoding":"audio/opus"}}}',
        "x" * 300_000,
    ],
)
def test_bad_carrier_messages_are_errors_with_codes(raw):
    with pytest.raises(OmnivoxError) as err:
        TWILIO.parse(raw)
    assert err.value.code in ("invalid_json", "invalid_message", "message_too_large")


@given(st.sampled_from(sorted(CARRIERS)), st.text(max_size=300))
def test_any_frame_parses_or_is_refused_cleanly(name, text):
    try:
        CARRIERS[name].parse(text)
    except OmnivoxError:
        pass
