"""A SIP phone in Python, for benchmarks and tests: it INVITEs omnivox over UDP (aiosipua's UAC,
digest credentials when challenged), sends the caller's audio as 20 ms PCMU RTP packets in real
time (and RFC 4733 key presses), and keeps every packet it receives with its arrival time, so
what it heard and when each sound began are known. It answers omnivox's BYE, can put the call on
hold and back (re-INVITE), hang up (BYE) or give up before the answer (CANCEL), and send raw
datagrams to the call's RTP port (a flood, a stranger's packets) for the tests of bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import Any

import numpy as np
from aiosipua import SipDigestAuth, SipUAC, SipUAS, parse_sdp, serialize_sdp

from omnivox.audio.g711 import ulaw_decode, ulaw_encode
from omnivox.audio.resample import resample
from omnivox.gateway.telephony.transports import UdpTransport
from omnivox.telephony import dtmf, sdp
from omnivox.telephony.rtp import InvalidRtp, RtpStream, parse_rtp

RATE = 8000
FRAME = 160  # 20 ms of PCMU
LOUD = 0.02


class _Rtp(asyncio.DatagramProtocol):
    def __init__(self, owner: SipCaller) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        with contextlib.suppress(InvalidRtp):
            packet = parse_rtp(data)
            if packet.payload_type == 0:
                self.owner.received.append((time.monotonic(), packet.payload))
            elif packet.payload_type == 101:  # telephone-event, as our offer numbers it
                with contextlib.suppress(dtmf.InvalidDtmf):
                    self.owner.keys.extend(self.owner._keys.feed(packet.timestamp, packet.payload))


class _Uac(SipUAC):
    """The UAC, keeping every response's (status, method)."""

    def __init__(self, transport: Any, responses: list[tuple[int, str]]) -> None:
        super().__init__(transport)
        self.responses = responses

    def handle_response(self, response: Any, addr: tuple[str, int]) -> None:
        method = response.cseq.method if response.cseq else ""
        self.responses.append((response.status_code, method))
        call = self._calls.get(response.call_id or "")
        if (
            call is not None
            and call._answered.is_set()
            and method == "INVITE"
            and response.status_code >= 300
        ):
            return  # a refused re-INVITE leaves the call as it was (aiosipua would end the dialog)
        super().handle_response(response, addr)


class SipCaller:
    """One call from a Python phone on 127.0.0.1 (or ``host``)."""

    def __init__(self, host: str = "127.0.0.1", user: str = "caller") -> None:
        self.host = host
        self.user = user
        self.received: list[tuple[float, bytes]] = []  # (arrival, PCMU payload) of each RTP packet
        self.keys: list[str] = []  # the keys omnivox pressed (RFC 4733 events), in order
        self._keys = dtmf.DtmfReceiver()
        self.sent_at: float | None = None  # when the last packet left
        self.ended = asyncio.Event()  # omnivox hung up (its BYE)
        self.status: int | None = None  # the final answer to the INVITE
        self.rtp_port = 0
        self.remote: tuple[str, int] | None = None  # omnivox's RTP address, from its answer
        self.call: Any = None
        self.responses: list[tuple[int, str]] = []  # every SIP response: (status, method)
        self._sip: Any = None
        self._uac: SipUAC | None = None
        self._rtp: asyncio.DatagramTransport | None = None
        self._out = RtpStream()
        self._silence_task: asyncio.Task[None] | None = None
        self._talking = asyncio.Lock()

    async def open(self) -> None:
        """Bind the SIP and RTP sockets (free ports)."""
        loop = asyncio.get_running_loop()
        self._sip = UdpTransport(local_addr=(self.host, 0))
        self._uac = _Uac(self._sip, self.responses)
        uas = SipUAS(self._sip, uac=self._uac)
        uas.on_bye = lambda call, request: self.ended.set()
        await uas.start()
        sip_port = self._sip._udp_transport.get_extra_info("sockname")[1]
        self._sip.local_addr = (self.host, sip_port)
        self._uac.advertised_addr = (self.host, sip_port)
        transport, _ = await loop.create_datagram_endpoint(lambda: _Rtp(self), local_addr=(self.host, 0))
        self._rtp = transport
        self.rtp_port = transport.get_extra_info("sockname")[1]

    async def dial(
        self,
        uri: str,
        gateway: tuple[str, int],
        auth: tuple[str, str] | None = None,
        headers: dict[str, str] | None = None,
        within_s: float = 10.0,
        wait: bool = True,
    ) -> int | None:
        """INVITE ``uri`` at ``gateway``; with ``wait``, until the final answer (its status)."""
        if self._uac is None:
            await self.open()
        assert self._uac is not None
        offer = parse_sdp(sdp.offer(self.host, self.rtp_port))
        self.call = self._uac.send_invite(
            f"sip:{self.user}@{self.host}:{self._sip.local_addr[1]}",
            uri,
            gateway,
            offer,
            extra_headers=headers,
            auth=SipDigestAuth(*auth) if auth else None,
        )
        if not wait:
            return None
        return await self.answered(within_s)

    async def answered(self, within_s: float = 10.0) -> int | None:
        """The final answer's status (None: none within ``within_s``); media flows after a 200."""
        call = self.call
        deadline = time.monotonic() + within_s
        while not (call._answered.is_set() or call._rejected.is_set()):
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.02)
        if call._rejected.is_set():
            self.status = call._reject_code
            return self.status
        self.status = 200
        plan = sdp.accept_answer(serialize_sdp(call.sdp_answer))
        self.remote = plan.remote
        self._silence_task = asyncio.create_task(self._keep_sending())
        return 200

    async def _keep_sending(self) -> None:
        """Silence between what ``speak`` says, as a phone's microphone never stops."""
        start, n = time.monotonic(), 0
        while True:
            if not self._talking.locked():
                self._send(b"\xff" * FRAME)
            n += 1
            await asyncio.sleep(max(0.0, start + n * 0.02 - time.monotonic()))
            if time.monotonic() - (start + n * 0.02) > 0.2:
                start, n = time.monotonic(), 0

    def _send(self, payload: bytes) -> None:
        if self._rtp is not None and self.remote is not None:
            self._rtp.sendto(self._out.packet(0, payload, len(payload)), self.remote)
            self.sent_at = time.monotonic()

    async def speak(self, audio: np.ndarray, rate: int) -> float:
        """Send ``audio`` (float32 at ``rate``) in real time, each 20 ms packet once it has been
        "recorded"; returns when the last packet left (= when its last sample was recorded)."""
        ulaw = ulaw_encode(resample(audio, rate, RATE))
        async with self._talking:
            start = time.monotonic()
            for n, i in enumerate(range(0, len(ulaw), FRAME)):
                await asyncio.sleep(max(0.0, start + (n + 1) * 0.02 - time.monotonic()))
                self._send(ulaw[i : i + FRAME].ljust(FRAME, b"\xff"))
        return time.monotonic()

    async def press(self, digit: str) -> None:
        assert self._rtp is not None and self.remote is not None
        for n, payload in enumerate(dtmf.event_payloads(digit)):
            self._rtp.sendto(self._out.event_packet(101, payload, marker=n == 0), self.remote)
            await asyncio.sleep(0.02)
        self._out.advance(8 * 160)

    def raw(self, data: bytes, source: socket.socket | None = None) -> None:
        """One datagram to omnivox's RTP port, from our RTP socket (or ``source``)."""
        assert self.remote is not None and self._rtp is not None
        if source is None:
            self._rtp.sendto(data, self.remote)
        else:
            source.sendto(data, self.remote)

    def reinvite(self, direction: str, codecs: list[tuple[int, str]] | None = None) -> None:
        """A re-INVITE offering ``direction`` (``sendonly``: hold; ``sendrecv``: resume) and
        ``codecs`` (PCMU)."""
        assert self._uac is not None and self.call is not None
        offer = sdp.render(self.host, self.rtp_port, codecs or [(0, "PCMU")], 101, direction)
        self._uac.send_reinvite(self.call.dialog, parse_sdp(offer), self.call.remote_addr)

    def hang_up(self) -> None:
        """BYE once answered, CANCEL before."""
        assert self._uac is not None and self.call is not None
        if self.call._answered.is_set():
            self.call.hangup(self._uac)
        else:
            self.call.cancel(self._uac)

    def heard(self) -> np.ndarray:
        """All it received, decoded (float32 at 8 kHz)."""
        return (
            ulaw_decode(b"".join(p for _, p in self.received)) if self.received else np.zeros(0, np.float32)
        )

    def first_sound_after(self, t: float) -> float | None:
        """When the first received packet with a loud sample arrived after ``t`` (and where in it)."""
        for arrival, payload in self.received:
            if arrival > t:
                loud = np.nonzero(np.abs(ulaw_decode(payload)) > LOUD)[0]
                if len(loud):
                    return arrival + loud[0] / RATE
        return None

    async def close(self) -> None:
        if self._silence_task is not None:
            self._silence_task.cancel()
            await asyncio.gather(self._silence_task, return_exceptions=True)
        if self._rtp is not None:
            self._rtp.close()
        if self._sip is not None:
            await self._sip.stop()
