"""One call's RTP socket, fed datagrams directly: who it takes audio from, what it drops."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from omnivox.telephony import rtp_endpoint
from omnivox.telephony.dtmf import DtmfReceiver, InvalidDtmf, event_payloads
from omnivox.telephony.playout import PacedPlayout
from omnivox.telephony.rtp import RtpPacket, build_rtp, parse_rtp
from omnivox.telephony.rtp_endpoint import MAX_PACKETS_PER_S, NoPortFree, PortPool, RtpEndpoint
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


class FakeTransport:
    """Stands in for the UDP socket (what would be sent is recorded, not sent)."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, tuple[str, int]]] = []
        self.closed = False

    def sendto(self, data: bytes, addr: tuple[str, int]) -> None:
        self.sent.append((data, addr))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_nothing_is_taken_before_the_plan_is_known() -> None:
    now = [0.0]
    e, audio, drops = endpoint(now)
    e.plan = None
    e.datagram_received(rtp(1), PEER)
    assert audio == [] and drops == [] and e.counters.received == 0


def test_key_presses_reach_the_session_once_and_bad_events_are_dropped() -> None:
    digits: list[str] = []
    drops: list[str] = []
    e = RtpEndpoint(
        PacedPlayout(lambda k, r: None),
        lambda a: None,
        digits.append,
        clock=lambda: 0.0,
        on_drop=drops.append,
    )
    e.plan = MediaPlan("PCMU", 0, 101, PEER, "sendrecv")
    for n, payload in enumerate(event_payloads("9")):
        e.datagram_received(build_rtp(RtpPacket(101, 10 + n, 8000, 7, payload)), PEER)
    e.datagram_received(build_rtp(RtpPacket(101, 30, 9600, 7, b"\x01")), PEER)  # too short
    assert digits == ["9"] and drops == ["malformed"]


def test_without_agreed_events_a_telephone_event_is_an_unknown_payload() -> None:
    now = [0.0]
    e, _, drops = endpoint(now)
    e.plan = MediaPlan("PCMU", 0, None, PEER, "sendrecv")
    e.datagram_received(build_rtp(RtpPacket(101, 1, 0, 7, event_payloads("1")[-1])), PEER)
    assert drops == ["malformed"]


def test_a_lost_packet_becomes_the_codecs_silence() -> None:
    audio: list[bytes] = []
    e = RtpEndpoint(PacedPlayout(lambda k, r: None), audio.append, lambda d: None, clock=lambda: 0.0)
    e.plan = MediaPlan("PCMA", 8, None, PEER, "sendrecv")
    for seq in (1, 3, 4, 5):  # 2 never comes: given up once three later packets wait
        e.datagram_received(build_rtp(RtpPacket(8, seq, seq * 160, 7, bytes([seq]) * 160)), PEER)
    assert audio == [b"\x01" * 160 + b"\xd5" * 160, b"\x03" * 160 + b"\x04" * 160]


def test_a_stream_with_a_new_ssrc_is_followed() -> None:
    now = [0.0]
    e, audio, drops = endpoint(now)
    e.datagram_received(rtp(100, ssrc=1), PEER)
    e.datagram_received(rtp(7, ssrc=2), PEER)  # the peer restarted its stream
    assert len(audio) == 1 and drops == [] and e.counters.received == 2


def test_a_port_range_runs_out_and_foreign_ports_are_not_taken_back() -> None:
    pool = PortPool(30000, 30004)
    assert [pool.take(), pool.take()] == [30000, 30002]
    with pytest.raises(NoPortFree):
        pool.take()
    pool.give(31000)  # never ours
    pool.give(30001)
    with pytest.raises(NoPortFree):
        pool.take()
    pool.give(30002)
    assert pool.take() == 30002


async def test_a_peer_on_hold_is_sent_nothing_and_the_reply_waits_unheard(monkeypatch) -> None:
    now = [0.0]
    playout = PacedPlayout(lambda k, r: None)
    e = RtpEndpoint(playout, lambda a: None, lambda d: None, clock=lambda: now[0])
    transport = FakeTransport()
    e.connection_made(transport)  # type: ignore[arg-type]
    real_sleep = asyncio.sleep
    ticks: list[float] = []

    async def tick(delay: float) -> None:  # the pacer's clock moves by what it waits: no real time
        now[0] += delay
        ticks.append(delay)
        await real_sleep(0)

    async def run(n: int) -> None:
        goal = len(ticks) + n
        while len(ticks) < goal:
            await real_sleep(0)

    monkeypatch.setattr(rtp_endpoint.asyncio, "sleep", tick)
    playout.push("r1", bytes(range(160)) * 5)
    try:
        e.start(MediaPlan("PCMU", 0, 101, PEER, "sendonly"))  # the caller put us on hold
        await run(5)
        assert transport.sent == [] and playout.buffered == 800 and playout.heard_ms("r1") == 0
        e.start(MediaPlan("PCMU", 0, 101, PEER, "inactive"))
        await run(3)
        assert transport.sent == []
        e.start(MediaPlan("PCMU", 0, 101, PEER, "sendrecv"))  # off hold: the reply from where it was
        await run(2)
    finally:
        e.close()
    packets = [parse_rtp(data) for data, addr in transport.sent]
    assert len(packets) >= 2 and packets[0].payload == bytes(range(160)) and playout.heard_ms("r1") >= 40


def test_an_ipv4_peer_seen_through_a_dual_stack_socket_is_the_sdps_peer() -> None:
    now = [0.0]
    e, audio, drops = endpoint(now)
    for seq in (1, 2):
        e.datagram_received(rtp(seq), ("::ffff:10.0.0.5", 4000))
    e.datagram_received(rtp(3), ("::ffff:10.0.0.6", 4000))
    assert len(audio) == 1 and drops == ["foreign"]


async def test_keys_are_pressed_as_paced_rfc_4733_events_a_receiver_reads_back() -> None:
    received: list[bytes] = []

    class Peer(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr) -> None:
            received.append(data)

    loop = asyncio.get_running_loop()
    peer, _ = await loop.create_datagram_endpoint(Peer, local_addr=("127.0.0.1", 0))
    e = RtpEndpoint(PacedPlayout(lambda kind, rid: None), lambda a: None, lambda d: None)
    await e.open("127.0.0.1", 0)
    try:
        e.plan = MediaPlan("PCMU", 0, 101, peer.get_extra_info("sockname"), "sendrecv")
        assert e.can_press
        with pytest.raises(InvalidDtmf):
            await e.press("1x")  # checked before anything is sent
        assert received == []
        await e.press("5#5")
        await asyncio.sleep(0.05)
    finally:
        e.close()
        peer.close()
    packets = [parse_rtp(d) for d in received]
    assert {p.payload_type for p in packets} == {101}
    receiver = DtmfReceiver()
    digits = [d for p in packets for d in receiver.feed(p.timestamp, p.payload)]
    assert digits == ["5", "#", "5"]  # the same key twice is two presses (timestamps of their own)
    assert len({p.timestamp for p in packets}) == 3 and sum(p.marker for p in packets) == 3
    assert [p.payload for p in packets[: len(packets) // 3]] == event_payloads("5", 120, 20)
    assert all((b.sequence - a.sequence) % 65536 == 1 for a, b in itertools.pairwise(packets))


async def test_without_agreed_events_no_key_can_be_pressed() -> None:
    e = RtpEndpoint(PacedPlayout(lambda kind, rid: None), lambda a: None, lambda d: None)
    e.plan = MediaPlan("PCMU", 0, None, PEER, "sendrecv")
    assert not e.can_press
    with pytest.raises(rtp_endpoint.KeysUnavailable):
        await e.press("1")
