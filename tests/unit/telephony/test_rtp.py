import pytest
from hypothesis import given
from hypothesis import strategies as st

from omnivox.telephony.rtp import InvalidRtp, JitterBuffer, RtpPacket, RtpStream, build_rtp, parse_rtp


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
