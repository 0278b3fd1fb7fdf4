"""One call's RTP socket, fed datagrams directly: who it takes audio from, what it drops."""

from __future__ import annotations

from omnivox.telephony.playout import PacedPlayout
from omnivox.telephony.rtp import RtpPacket, build_rtp
from omnivox.telephony.rtp_endpoint import MAX_PACKETS_PER_S, PortPool, RtpEndpoint
from omnivox.telephony.sdp import MediaPlan

PEER = ("10.0.0.5", 4000)


def endpoint(now: list[float]) -> tuple[RtpEndpoint, list[bytes], list[str]]:
    audio: list[bytes] = []
    drops: list[str] = []
    e = RtpEndpoint(
        PacedPlayout(lambda kind, rid: None),
        audio.append,
        lambda d: None,
        clock=lambda: now[0],
        on_drop=drops.append,
    )
    e.plan = MediaPlan("PCMU", 0, 101, PEER, "sendrecv")
    return e, audio, drops


def rtp(seq: int, ssrc: int = 7, pt: int = 0) -> bytes:
    return build_rtp(RtpPacket(pt, seq, seq * 160, ssrc, b"\x55" * 160))


def test_the_sdps_address_wins_over_a_stranger_on_the_same_host() -> None:
    now = [0.0]
    e, audio, drops = endpoint(now)
    e.datagram_received(rtp(1, ssrc=9), ("10.0.0.5", 4999))  # first, but not the SDP's port: latched (NAT)
    for seq in range(100, 104):
        e.datagram_received(rtp(seq), PEER)  # the SDP's own port takes over
    e.datagram_received(rtp(2, ssrc=9), ("10.0.0.5", 4999))
    e.datagram_received(rtp(3), ("10.9.9.9", 4000))
    assert drops == ["foreign", "foreign"] and e.counters.received == 5
    assert len(audio) == 2  # 80 ms of the caller in 40 ms pieces (the stranger's 20 ms among them)


def test_junk_unknown_payloads_and_floods_are_dropped_and_counted() -> None:
    now = [0.0]
    e, _, drops = endpoint(now)
    e.datagram_received(b"\x00junk", PEER)
    e.datagram_received(rtp(1, pt=99), PEER)
    e.datagram_received(build_rtp(RtpPacket(101, 2, 0, 7, b"\x63\x80\x00\xa0")), PEER)  # event 99: no digit
    for seq in range(10, 10 + MAX_PACKETS_PER_S + 50):
        e.datagram_received(rtp(seq), PEER)
    assert drops.count("malformed") == 3 and drops.count("flooded") == 53
    now[0] = 1.5  # the next second takes packets again
    e.datagram_received(rtp(500), PEER)
    assert drops.count("flooded") == 53


def test_ports_come_back_to_the_range() -> None:
    pool = PortPool(20001, 20007)
    taken = [pool.take(), pool.take(), pool.take()]
    assert taken == [20002, 20004, 20006]
    pool.give(taken[1])
    pool.give(taken[1])  # twice is once
    assert pool.take() == 20004 and not pool.free
