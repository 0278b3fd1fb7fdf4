import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnivox.telephony.rtp import (
    MAX_PAYLOAD,
    InvalidRtp,
    JitterBuffer,
    RtpPacket,
    RtpStream,
    build_rtp,
    parse_rtp,
)


def packet(seq: int, payload: bytes = b"\xff" * 160) -> RtpPacket:
    return RtpPacket(0, seq % 65536, seq * 160, 1234, payload)


def test_a_packet_round_trips():
    p = RtpPacket(8, 65535, 4294967295, 99, b"abc", marker=True)
    assert parse_rtp(build_rtp(p)) == p


def test_a_stream_numbers_its_packets():
    s = RtpStream()
    a, b = parse_rtp(s.packet(0, b"x" * 160, 160)), parse_rtp(s.packet(0, b"y" * 160, 160))
    assert (b.sequence - a.sequence) % 65536 == 1 and (b.timestamp - a.timestamp) % 2**32 == 160
    assert a.ssrc == b.ssrc


@pytest.mark.parametrize(
    "data", [b"", b"\x80\x00", b"\x00" * 12, b"\x8f" + b"\x00" * 11, b"\xa0" + b"\x00" * 11]
)
def test_what_is_not_rtp_is_refused(data):
    with pytest.raises(InvalidRtp):
        parse_rtp(data)


@given(st.binary(max_size=2000))
def test_any_datagram_parses_or_is_refused_cleanly(data):
    try:
        p = parse_rtp(data)
    except InvalidRtp:
        return
    assert len(p.payload) <= len(data)


def test_the_jitter_buffer_reorders_and_gives_up_on_a_gap():
    jb = JitterBuffer(depth=2)
    assert jb.push(packet(10)) == [packet(10)]
    assert jb.push(packet(12)) == []  # 11 may still come
    assert jb.push(packet(11)) == [packet(11), packet(12)]
    assert jb.push(packet(14)) == []
    assert jb.push(packet(15)) == [None, packet(14), packet(15)]  # 13 lost
    assert jb.lost == 1
    assert jb.push(packet(13)) == [] and jb.late == 1  # too late now
    assert jb.push(packet(15)) == []  # a duplicate


def test_the_jitter_buffer_follows_the_sequence_wrap():
    jb = JitterBuffer()
    assert [p.sequence for p in jb.push(packet(65535)) + jb.push(packet(65536)) if p] == [65535, 0]


def test_stray_packets_never_leave_the_real_stream_late_for_good():
    jb = JitterBuffer()
    real = 40000
    assert jb.push(packet(real)) == [packet(real)]
    stray = RtpPacket(0, 0, 0, 99, b"\xff" * 160)  # another SSRC, numbered far before the stream
    assert jb.push(stray) == [stray]  # followed: a new stream began
    assert jb.push(packet(real + 1)) == [packet(real + 1)]  # and the real one again after it
    assert jb.push(packet(real + 1 - 200)) == [packet(real + 1 - 200)]  # far behind: a restart, not late
    assert jb.push(packet(real + 1 - 210)) == [] and jb.late == 1  # merely late: dropped


def raw(first: int = 0x80, second: int = 0, seq: int = 1, ts: int = 2, ssrc: int = 3) -> bytes:
    return bytes([first, second]) + seq.to_bytes(2, "big") + ts.to_bytes(4, "big") + ssrc.to_bytes(4, "big")


def test_header_fields_are_read() -> None:
    p = parse_rtp(raw(second=0x80 | 101, seq=0xBEEF, ts=0xDEADBEEF, ssrc=0xFFFFFFFF) + b"\x01\x02")
    assert (p.payload_type, p.marker, p.sequence, p.timestamp, p.ssrc) == (
        101,
        True,
        0xBEEF,
        0xDEADBEEF,
        2**32 - 1,
    )
    assert p.payload == b"\x01\x02"


@pytest.mark.parametrize("version", [0, 1, 3])
def test_only_version_2_is_rtp(version: int) -> None:
    with pytest.raises(InvalidRtp):
        parse_rtp(raw(first=version << 6) + b"\x00" * 160)


def test_csrcs_are_skipped() -> None:
    csrcs = b"".join(n.to_bytes(4, "big") for n in (11, 12, 13))
    assert parse_rtp(raw(first=0x83) + csrcs + b"audio").payload == b"audio"
    with pytest.raises(InvalidRtp):
        parse_rtp(raw(first=0x8F) + b"\x00" * 59)  # 15 CSRCs take 60 bytes: one short
    assert parse_rtp(raw(first=0x8F) + b"\x00" * 60).payload == b""


def test_a_header_extension_is_skipped_by_its_length() -> None:
    extension = b"\xbe\xde\x00\x02" + b"\x10\xaa\x00\x00" + b"\x00" * 4  # RFC 8285 one-byte, 2 words
    assert parse_rtp(raw(first=0x90) + extension + b"audio").payload == b"audio"
    assert parse_rtp(raw(first=0x91) + b"\x00" * 4 + extension + b"x").payload == b"x"  # after a CSRC
    for truncated in (b"\xbe\xde", b"\xbe\xde\x00\x02" + b"\x00" * 7, b"\xbe\xde\xff\xff"):
        with pytest.raises(InvalidRtp):
            parse_rtp(raw(first=0x90) + truncated)


def test_padding_is_removed_by_the_count_in_its_last_byte() -> None:
    assert parse_rtp(raw(first=0xA0) + b"audio" + b"\x00\x00\x03").payload == b"audio"
    assert parse_rtp(raw(first=0xA0) + b"audio\x01").payload == b"audio"
    assert parse_rtp(raw(first=0xA0) + b"\x00\x00\x00\x04").payload == b""  # padding only
    assert parse_rtp(raw(first=0x80) + b"audio\x03").payload == b"audio\x03"  # no P bit: payload


@pytest.mark.parametrize(
    "padded",
    [
        b"audio\x00",  # a count of 0 (it counts itself, so at least 1)
        b"audio\x07",  # more than the payload
        b"\xff",
        b"",
    ],
)
def test_impossible_padding_is_refused(padded: bytes) -> None:
    with pytest.raises(InvalidRtp):
        parse_rtp(raw(first=0xA0) + padded)


def test_a_payload_past_the_mtu_is_no_audio() -> None:
    assert len(parse_rtp(raw() + b"\x00" * MAX_PAYLOAD).payload) == MAX_PAYLOAD
    with pytest.raises(InvalidRtp):
        parse_rtp(raw() + b"\x00" * (MAX_PAYLOAD + 1))


def test_a_stream_wraps_its_sequence_and_timestamp_and_keeps_event_timestamps() -> None:
    s = RtpStream()
    s.sequence, s.timestamp = 65535, 2**32 - 80
    a, b = parse_rtp(s.packet(0, b"a", 160)), parse_rtp(s.packet(0, b"b", 160))
    assert (a.sequence, b.sequence) == (65535, 0) and (a.timestamp, b.timestamp) == (2**32 - 80, 80)
    e1, e2 = parse_rtp(s.event_packet(101, b"e", marker=True)), parse_rtp(s.event_packet(101, b"e"))
    assert e1.timestamp == e2.timestamp == 240 and (e1.marker, e2.marker) == (True, False)
    assert (e1.sequence, e2.sequence) == (1, 2)
    s.advance(1280)
    assert parse_rtp(s.packet(0, b"c", 160)).timestamp == 240 + 1280


def test_the_jitter_buffer_holds_at_most_depth_before_giving_up_a_gap() -> None:
    jb = JitterBuffer(depth=3)
    assert jb.push(packet(0)) == [packet(0)]
    assert jb.push(packet(2)) == [] and jb.push(packet(3)) == []
    assert jb.push(packet(4)) == [None, packet(2), packet(3), packet(4)] and jb.lost == 1


def test_a_new_ssrc_is_a_new_stream_from_its_first_packet() -> None:
    jb = JitterBuffer()
    assert jb.push(packet(100)) == [packet(100)]
    assert jb.push(packet(102)) == []  # 101 awaited
    other = RtpPacket(0, 5000, 0, 4321, b"\x00")
    assert jb.push(other) == [other]  # the held packet of the old stream is dropped
    assert jb.push(RtpPacket(0, 5001, 160, 4321, b"\x00")) == [RtpPacket(0, 5001, 160, 4321, b"\x00")]
    assert jb.late == 0 and jb.lost == 0


def test_a_jump_within_capacity_is_a_gap_past_it_a_restart() -> None:
    jb = JitterBuffer(depth=1, capacity=50)
    jb.push(packet(1000))
    assert jb.push(packet(1000 + 50)) == [None] * 49 + [packet(1050)] and jb.lost == 49
    jb = JitterBuffer(depth=1, capacity=50)
    jb.push(packet(1000))
    assert jb.push(packet(1000 + 52)) == [packet(1052)] and jb.lost == 0  # restarted there


def test_duplicates_and_late_packets_are_counted_across_the_wrap() -> None:
    jb = JitterBuffer()
    for seq in (65534, 65535, 65536, 65537):
        jb.push(packet(seq))
    assert jb.push(packet(65535)) == [] and jb.push(packet(65537)) == []
    assert jb.late == 2 and jb.lost == 0


@given(
    st.integers(0, 65535),
    st.integers(1, 5),
    st.lists(st.tuples(st.integers(0, 45), st.booleans()), max_size=80),
)
def test_the_jitter_buffer_releases_each_packet_once_in_sequence(base: int, depth: int, moves) -> None:  # type: ignore[no-untyped-def]
    # any order, loss and duplication within the buffer's capacity of the stream's first packet
    jb = JitterBuffer(depth=depth)
    out = []
    for offset, twice in [(0, False), *moves]:
        p = RtpPacket(0, (base + offset) % 65536, 0, 1, bytes([offset]))
        out += jb.push(p)
        if twice:
            out += jb.push(p)
    for i, p in enumerate(out):  # a None stands for one lost number, so position i is base + i
        assert p is None or p.sequence == (base + i) % 65536
    assert jb.lost == out.count(None)
