"""The phone fuzz's frames: SIP datagrams and carrier stream frames, seeded."""

from __future__ import annotations

import itertools

from omnivox.bench.carrier_client import CarrierStream
from omnivox.bench.fuzz_phone import _fields, carrier_frames, sip_datagrams


def take(source, n):
    return list(itertools.islice(source, n))


def test_sip_datagrams_are_seeded_invites_and_other_requests():
    first = take(sip_datagrams(5060, 40000, 3), 300)
    assert {k for k, _ in first} == {"invite", "other"}
    assert sum(k == "invite" for k, _ in first) > 150
    assert first == take(sip_datagrams(5060, 40000, 3), 300)
    assert first != take(sip_datagrams(5060, 40000, 4), 300)


def test_compact_headers_are_read_as_their_full_names():
    assert _fields(["i: abc", "f: <sip:a@b>;tag=1", "CSeq: 1 INVITE"]) == {
        "call-id": "abc",
        "from": "<sip:a@b>;tag=1",
        "cseq": "1 INVITE",
    }


def test_carrier_frames_carry_the_stream_s_id_and_hostile_ones():
    for carrier in ("twilio", "telnyx", "plivo"):
        stream = CarrierStream(carrier)
        frames = take(carrier_frames(stream, 1), 400)
        kinds = {k for k, _ in frames}
        assert {"valid_media", "mutated", "binary", "truncated", "nested", "oversized"} <= kinds
        media = next(f for k, f in frames if k == "valid_media")
        assert stream.stream_id in media
