"""RTP (RFC 3550) packets for G.711 audio and telephone events, and the receive jitter buffer.

Only what a phone call needs: version 2, no padding or extension handling beyond skipping them,
one SSRC per direction. ``parse_rtp`` is strict (a datagram that is not RTP raises ``InvalidRtp``
and is dropped by the caller); ``JitterBuffer`` puts packets back in sequence order, drops late
and duplicate ones, and reports a gap as lost once enough later packets have arrived.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

HEADER = struct.Struct("!BBHII")
MAX_PAYLOAD = 1400  # larger datagrams are not audio this side of a jumbo frame: dropped
SEQ_MOD = 1 << 16


class InvalidRtp(ValueError):
    """A datagram that is not an RTP packet omnivox can read."""


@dataclass(frozen=True)
class RtpPacket:
    payload_type: int
    sequence: int
    timestamp: int
    ssrc: int
    payload: bytes
    marker: bool = False


def parse_rtp(data: bytes) -> RtpPacket:
    """One RTP packet; raises ``InvalidRtp``."""
    if len(data) < HEADER.size:
        raise InvalidRtp("shorter than an RTP header")
    first, second, sequence, timestamp, ssrc = HEADER.unpack_from(data)
    if first >> 6 != 2:
        raise InvalidRtp("not RTP version 2")
    offset = HEADER.size + 4 * (first & 0x0F)  # CSRC list
    if first & 0x10:  # header extension: its length is in 32-bit words after a 16-bit profile
        if len(data) < offset + 4:
            raise InvalidRtp("truncated header extension")
        offset += 4 + 4 * struct.unpack_from("!H", data, offset + 2)[0]
    end = len(data)
    if first & 0x20:  # padding: the last byte says how much, itself included (so never 0)
        if end <= offset:
            raise InvalidRtp("padding without a payload")
        if data[-1] == 0:
            raise InvalidRtp("a padding count of 0")
        end -= data[-1]
    if end < offset:
        raise InvalidRtp("header longer than the packet")
    payload = data[offset:end]
    if len(payload) > MAX_PAYLOAD:
        raise InvalidRtp("payload too large")
    return RtpPacket(second & 0x7F, sequence, timestamp, ssrc, bytes(payload), bool(second & 0x80))


def build_rtp(packet: RtpPacket) -> bytes:
    second = (0x80 if packet.marker else 0) | (packet.payload_type & 0x7F)
    return HEADER.pack(0x80, second, packet.sequence, packet.timestamp, packet.ssrc) + packet.payload


class RtpStream:
    """The numbering of one outgoing stream: a random SSRC, sequence and timestamp base."""

    def __init__(self) -> None:
        self.ssrc = random.getrandbits(32)
        self.sequence = random.getrandbits(16)
        self.timestamp = random.getrandbits(32)

    def packet(self, payload_type: int, payload: bytes, samples: int, *, marker: bool = False) -> bytes:
        """The next packet, ``samples`` long (the timestamp advances by that much after it)."""
        data = build_rtp(RtpPacket(payload_type, self.sequence, self.timestamp, self.ssrc, payload, marker))
        self.sequence = (self.sequence + 1) % SEQ_MOD
        self.timestamp = (self.timestamp + samples) % (1 << 32)
        return data

    def event_packet(
        self, payload_type: int, payload: bytes, *, marker: bool = False, timestamp: int | None = None
    ) -> bytes:
        """A telephone-event packet: every packet of one event carries the timestamp of its start
        (``timestamp``; by default the stream's own, which the audio sent meanwhile moves on)."""
        stamp = self.timestamp if timestamp is None else timestamp
        data = build_rtp(RtpPacket(payload_type, self.sequence, stamp, self.ssrc, payload, marker))
        self.sequence = (self.sequence + 1) % SEQ_MOD
        return data

    def advance(self, samples: int) -> None:
        self.timestamp = (self.timestamp + samples) % (1 << 32)


def _ahead(a: int, b: int) -> int:
    """How many sequence numbers ``a`` is after ``b`` (negative: before), across the wrap."""
    d = (a - b) % SEQ_MOD
    return d - SEQ_MOD if d >= SEQ_MOD // 2 else d


class JitterBuffer:
    """Reorders one stream's packets. ``push`` returns what is ready to play, in order: packets, and
    ``None`` for each one lost (a gap is given up once ``depth`` later packets are waiting).

    ``depth`` is the reordering it absorbs (packets); the first packet sets where the stream starts.
    Late packets (before what was already released) and duplicates are dropped and counted. A new
    SSRC, or a sequence number more than ``capacity`` away either side, is a stream that started
    again (a restarted sender, packets someone else slipped in): it is followed from there, so no
    stray packet can leave the real stream counted as late for good.
    """

    def __init__(self, depth: int = 3, capacity: int = 50) -> None:
        self.depth = depth
        self.capacity = capacity
        self.next: int | None = None
        self.ssrc: int | None = None
        self._held: dict[int, RtpPacket] = {}
        self.late = 0
        self.lost = 0

    def push(self, packet: RtpPacket) -> list[RtpPacket | None]:
        if self.next is None or packet.ssrc != self.ssrc:
            self.next, self.ssrc = packet.sequence, packet.ssrc
            self._held.clear()
        ahead = _ahead(packet.sequence, self.next)
        if abs(ahead) > self.capacity:  # a jump: the sender restarted its numbering; start again there
            self._held.clear()
            self.next = packet.sequence
        elif ahead < 0 or packet.sequence in self._held:
            self.late += 1
            return []
        self._held[packet.sequence] = packet
        return self._release()

    def _release(self) -> list[RtpPacket | None]:
        out: list[RtpPacket | None] = []
        assert self.next is not None
        while self._held:
            packet = self._held.pop(self.next, None)
            if packet is None:
                if len(self._held) < self.depth:
                    break
                self.lost += 1
            out.append(packet)
            self.next = (self.next + 1) % SEQ_MOD
        return out
