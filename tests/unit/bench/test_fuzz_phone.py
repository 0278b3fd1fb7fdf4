"""The phone fuzz's frames: SIP datagrams and carrier stream frames, seeded."""

from __future__ import annotations

import itertools
import random

from omnivox.bench.carrier_client import CarrierStream
from omnivox.bench.fuzz_phone import _fields, carrier_frames, invite, sip_datagrams


def take(source, n):
    return list(itertools.islice(source, n))


def test_a_valid_invite_is_well_formed_sip_with_a_g711_offer():
    msg, call_id = invite(random.Random(0), 5060, 40000)
    text = msg.encode().decode()
    head, _, body = text.partition("\r\n\r\n")
    assert head.startswith("INVITE sip:agent@127.0.0.1:5060 SIP/2.0\r\n")
    fields = _fields(head.split("\r\n")[1:])
    assert fields["call-id"] == call_id and fields["cseq"] == "1 INVITE"
    assert int(fields["content-length"]) == len(body.encode())
    assert "m=audio" in body and "PCMU/8000" in body


def test_sip_datagrams_are_seeded_and_mix_every_kind():
    first = [(k, d) for k, d, _ in take(sip_datagrams(5060, 40000, 3), 300)]
    kinds = {k for k, _ in first}
    assert kinds >= {"valid_invite", "mutated_invite", "other_method", "truncated", "garbage", "oversized"}
    assert all(len(d) <= 65_507 for _, d in first)  # every one fits a UDP datagram
    assert [k for k, _ in first] == [k for k, _, _ in take(sip_datagrams(5060, 40000, 3), 300)]


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
