"""One call's RTP: a UDP socket on a port from the configured range, the caller's audio in
(through the jitter buffer, in ``CHUNK_MS`` pieces), RFC 4733 key presses, and the reply's audio
out, paced one 20 ms packet at a time from a ``PacedPlayout`` (none while the peer is on hold).

RTP is taken only from the address the SDP named (the first port it comes from there is kept, for
peers behind a NAT that rewrites it, until packets come from the SDP's own port); packets from
anyone else, malformed ones, payload types not agreed, and packets past ``MAX_PACKETS_PER_S`` (a
flood) are dropped and counted (``on_drop``), never an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from omnivox.telephony.dtmf import DtmfReceiver, InvalidDtmf, event_payloads
from omnivox.telephony.playout import FRAME_BYTES, FRAME_MS, SILENCE, PacedPlayout
from omnivox.telephony.rtp import InvalidRtp, JitterBuffer, RtpStream, parse_rtp
from omnivox.telephony.sdp import MediaPlan

log = logging.getLogger(__name__)

CHUNK_MS = 40  # caller audio per event to the session
MAX_PACKETS_PER_S = 200  # a 20 ms stream is 50, its key presses a few more
# a peer whose SDP says it takes no media (on hold, or c=0.0.0.0) is sent none (RFC 3264): the
# reply waits in the playout where it was, unheard, until the call is taken off hold
NOT_RECEIVING = ("sendonly", "inactive")
KEY_DOWN_MS = 120  # how long a pressed key sounds (ITU-T Q.24 asks for at least 40 ms)
KEY_GAP_MS = 100  # silence between two presses


class KeysUnavailable(Exception):
    """The call cannot carry key presses (no telephone-event payload type agreed)."""


class NoPortFree(Exception):
    """Every RTP port of the range is held by a call."""


class PortPool:
    """RTP ports (even numbers; RTCP would take the odd one above) from ``low`` to ``high``."""

    def __init__(self, low: int, high: int) -> None:
        self.free = list(range(low + low % 2, high, 2))
        self.held: set[int] = set()

    def take(self) -> int:
        if not self.free:
            raise NoPortFree("every RTP port of the range is in use")
        port = self.free.pop(0)
        self.held.add(port)
        return port

    def give(self, port: int) -> None:
        if port in self.held:
            self.held.discard(port)
            self.free.append(port)


@dataclass
class Counters:
    received: int = 0
    foreign: int = 0  # from an address the SDP did not name
    malformed: int = 0  # not RTP, a payload type not agreed, a telephone event that is no digit
    flooded: int = 0  # past MAX_PACKETS_PER_S
    sent: int = 0


DROPS = ("foreign", "malformed", "flooded")


class RtpEndpoint(asyncio.DatagramProtocol):
    """One call's media socket. ``plan`` may come later (a call omnivox places learns it from the
    answer); until then nothing is sent or taken."""

    def __init__(
        self,
        playout: PacedPlayout,
        on_audio: Callable[[bytes], None],
        on_dtmf: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        on_drop: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.playout = playout
        self.on_audio = on_audio
        self.on_dtmf = on_dtmf
        self.clock = clock
        self.on_drop = on_drop  # told each dropped packet's reason (one of DROPS)
        self.plan: MediaPlan | None = None
        self.counters = Counters()
        self.port = 0
        self._transport: asyncio.DatagramTransport | None = None
        self._source: tuple[str, int] | None = None
        self._jitter = JitterBuffer()
        self._dtmf = DtmfReceiver()
        self._out = RtpStream()
        self._held = bytearray()
        self._window = (0.0, 0)  # (second it counts, packets in it)
        self._pacer: asyncio.Task[None] | None = None

    async def open(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: self, local_addr=(host, port))
        self.port = port

    def start(self, plan: MediaPlan) -> None:
        """Media flows from now on, as ``plan`` says."""
        self.plan = plan
        self._source = None
        if self._pacer is None:
            self._pacer = asyncio.ensure_future(self._pace())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.DatagramTransport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        plan = self.plan
        if plan is None:
            return
        host = str(addr[0])
        if host.startswith("::ffff:") and "." in host:  # an IPv4 peer seen through a dual-stack socket
            host = host[7:]
        source = (host, int(addr[1]))
        if source == plan.remote or (self._source is None and source[0] == plan.remote[0]):
            self._source = source  # the SDP's own address always wins over a port latched before it
        if source != self._source:
            self._drop("foreign")
            return
        second, count = self._window
        now = self.clock()
        if now - second >= 1.0:
            second, count = now, 0
        self._window = (second, count + 1)
        if count >= MAX_PACKETS_PER_S:
            self._drop("flooded")
            return
        try:
            packet = parse_rtp(data)
        except InvalidRtp:
            self._drop("malformed")
            return
        self.counters.received += 1
        if packet.payload_type == plan.dtmf_payload_type:
            try:
                for digit in self._dtmf.feed(packet.timestamp, packet.payload):
                    self.on_dtmf(digit)
            except InvalidDtmf:
                self._drop("malformed")
            return
        if packet.payload_type != plan.payload_type:
            self._drop("malformed")
            return
        silence = SILENCE.get(plan.encoding, b"\xff")
        for ready in self._jitter.push(packet):
            self._held += ready.payload if ready is not None else silence * FRAME_BYTES
        chunk = FRAME_BYTES * CHUNK_MS // FRAME_MS
        while len(self._held) >= chunk:
            self.on_audio(bytes(self._held[:chunk]))
            del self._held[:chunk]

    def _drop(self, reason: str) -> None:
        setattr(self.counters, reason, getattr(self.counters, reason) + 1)
        self.on_drop(reason)

    def error_received(self, exc: Exception) -> None:
        log.debug("rtp port %s: %s", self.port, exc)

    async def _pace(self) -> None:
        """One packet every 20 ms, on a schedule (a late tick sends what it owes at once)."""
        start = self.clock()
        sent = 0
        while True:
            plan, transport = self.plan, self._transport
            if plan is None or transport is None or transport.is_closing():
                return
            if plan.direction not in NOT_RECEIVING:
                frame = self.playout.take()
                transport.sendto(self._out.packet(plan.payload_type, frame, FRAME_BYTES), plan.remote)
                self.counters.sent += 1
            sent += 1
            wait = start + sent * FRAME_MS / 1000 - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            elif wait < -0.2:  # the loop stalled: do not burst the backlog at the caller
                start, sent = self.clock(), 0

    @property
    def can_press(self) -> bool:
        """The peer agreed to RFC 4733 telephone events and media flows."""
        return self.plan is not None and self.plan.dtmf_payload_type is not None

    async def press(self, digits: str) -> None:
        """Press ``digits`` (0-9, *, #, A-D) one after the other, as RFC 4733 events paced in real
        time: an update every 20 ms while a key is down, three end packets, then a short gap.
        Raises ``InvalidDtmf`` (before sending anything) or ``KeysUnavailable``."""
        presses = [event_payloads(d, KEY_DOWN_MS, FRAME_MS) for d in digits]  # checks them all first
        for payloads in presses:
            plan, transport = self.plan, self._transport
            if plan is None or plan.dtmf_payload_type is None or transport is None:
                raise KeysUnavailable("the call agreed no telephone events (RFC 4733), or has ended")
            start = self._out.timestamp
            for n, payload in enumerate(payloads):
                packet = self._out.event_packet(
                    plan.dtmf_payload_type, payload, marker=n == 0, timestamp=start
                )
                transport.sendto(packet, plan.remote)
                if n < len(payloads) - 3:  # the three end packets go together
                    await asyncio.sleep(FRAME_MS / 1000)
            await asyncio.sleep(KEY_GAP_MS / 1000)
            if self._out.timestamp == start:  # no audio went out meanwhile (on hold): the next
                self._out.advance(8 * (KEY_DOWN_MS + KEY_GAP_MS))  # press needs a timestamp of its own

    def close(self) -> None:
        if self._pacer is not None:
            self._pacer.cancel()
        if self._transport is not None:
            self._transport.close()
