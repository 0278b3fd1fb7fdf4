"""What every carrier's reader does with hostile frames: a clear error with its code, never an
exception of another kind, and never a stream event."""

from __future__ import annotations

import pytest

from omnivox.core.errors import OmnivoxError
from omnivox.telephony.carriers import CARRIERS
from omnivox.telephony.carriers.base import MAX_FRAME_BYTES, encoding_of

HOSTILE = [
    ("not json", "invalid_json"),
    ("", "invalid_json"),
    (b"\xff\xfe\x00", "invalid_json"),
    ('{"event": "media"', "invalid_json"),
    ("[" * 100_000 + "]" * 100_000, "invalid_message"),  # nested past any real message: no RecursionError
    (
        '{"event": "media", "media": {"payload": "AAE=", "x": ' + "[" * 5000 + "]" * 5000 + "}}",
        "invalid_message",
    ),
    ('{"event": "media", "media": {"payload": "\\ud800"}}', "invalid_message"),  # a lone surrogate
    ("[]", "invalid_message"),
    ("null", "invalid_message"),
    ("42", "invalid_message"),
    ('{"no": "event"}', "invalid_message"),
    ('{"event": "hangup"}', "invalid_message"),
    ('{"event": 1}', "invalid_message"),
    ('{"event": "media"}', "invalid_message"),
    ('{"event": "media", "media": {"payload": 5}}', "invalid_message"),
    ('{"event": "media", "media": {"payload": "AAE"}}', "invalid_message"),  # not base64: unpadded
    ('{"event": "media", "media": {"payload": "AA E="}}', "invalid_message"),
    ('{"event": "dtmf", "dtmf": {"digit": ""}}', "invalid_message"),
    ('{"event": "dtmf", "dtmf": {}}', "invalid_message"),
    ("x" * (MAX_FRAME_BYTES + 1), "message_too_large"),
]


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
@pytest.mark.parametrize(("raw", "code"), HOSTILE)
def test_hostile_frames_are_refused_with_their_code(carrier: str, raw: str | bytes, code: str) -> None:
    with pytest.raises(OmnivoxError) as err:
        CARRIERS[carrier].parse(raw)
    assert err.value.code == code
    assert not err.value.fatal  # one bad frame never costs the call


@pytest.mark.parametrize(
    ("name", "encoding"),
    [
        ("audio/x-mulaw", "audio/pcmu"),
        ("AUDIO/X-MULAW", "audio/pcmu"),
        ("audio/x-mulaw;rate=8000", "audio/pcmu"),
        ("PCMU", "audio/pcmu"),
        ("audio/x-alaw", "audio/pcma"),
        ("PCMA", "audio/pcma"),
    ],
)
def test_g711_encodings_by_any_carriers_name(name: str, encoding: str) -> None:
    assert encoding_of(name) == encoding


@pytest.mark.parametrize("name", ["audio/x-l16", "L16", "G722", "OPUS", "AMR-WB", "", "mulaw"])
def test_other_encodings_are_refused(name: str) -> None:
    with pytest.raises(OmnivoxError) as err:
        encoding_of(name)
    assert err.value.code == "invalid_message"
