"""A SIP call's signalling and media beside its ``PhoneCall``: the INVITE omnivox answered
(``InboundLeg``) or placed (``OutboundLeg``), and the call's RTP port. ``SipLegs`` holds the legs
by SIP Call-ID and by call id, and gives the port back however the call ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod

from aiosipua import DialogState, IncomingCall, OutgoingCall

from omnivox.core.config import PhoneProfile
from omnivox.core.errors import NotFound
from omnivox.gateway.telephony.call import PhoneCall
from omnivox.gateway.telephony.metrics import TelephonyMetrics
from omnivox.gateway.telephony.transports import Uac
from omnivox.telephony.playout import PacedPlayout
from omnivox.telephony.rtp_endpoint import NoPortFree, PortPool, RtpEndpoint
from omnivox.telephony.sdp import MediaPlan, Origin

log = logging.getLogger(__name__)

BIND_TRIES = 8  # ports of the range tried when another program holds one


class SipLeg(ABC):
    """One SIP call's signalling, its RTP endpoint and the profile it runs."""

    direction: str

    def __init__(self, call: PhoneCall, endpoint: RtpEndpoint, profile: PhoneProfile) -> None:
        self.call = call
        self.endpoint = endpoint
        self.profile = profile
        call.keypad = endpoint.press  # RFC 4733 events, where the answer agreed them
        self.plan: MediaPlan | None = None
        self.origin = Origin.now()  # our SDP's o= line for this call (a re-INVITE's answer: +1)
        self.decided = asyncio.Event()  # no longer ringing: answered, refused or gone
        self.remote_hung_up = False  # the far end ended it (BYE, CANCEL): nothing to send

    @property
    @abstractmethod
    def sip_call_id(self) -> str: ...

    @abstractmethod
    def hang_up(self) -> None:
        """End the call on the wire: a BYE once answered; before that what the direction needs."""

    @abstractmethod
    def refer(self, target: str) -> None:
        """Ask the far end to call ``target`` instead (a blind transfer, RFC 3515)."""


class InboundLeg(SipLeg):
    direction = "inbound"

    def __init__(
        self,
        incoming: IncomingCall,
        call: PhoneCall,
        endpoint: RtpEndpoint,
        profile: PhoneProfile,
        plan: MediaPlan,
        answer_sdp: str,
    ) -> None:
        super().__init__(call, endpoint, profile)
        self.incoming = incoming
        self.plan = plan
        self.answer_sdp = answer_sdp

    @property
    def sip_call_id(self) -> str:
        return self.incoming.call_id

    def hang_up(self) -> None:
        with contextlib.suppress(Exception):
            self.incoming.hangup()  # a BYE (nothing before the answer: the call was refused by then)

    def refer(self, target: str) -> None:
        incoming = self.incoming
        local = incoming._signaling_addr()
        refer = incoming.dialog.create_request("REFER", via_host=local[0], via_port=local[1])
        refer.headers.set_single("Refer-To", f"<{target}>")
        refer.headers.set_single("Referred-By", f"<{incoming.dialog.local_uri}>")
        refer.headers.set_single("Contact", f"<sip:{local[0]}:{local[1]}>")
        incoming.transport.send(refer, incoming.source_addr)  # type: ignore[union-attr]


class OutboundLeg(SipLeg):
    direction = "outbound"

    def __init__(
        self, outgoing: OutgoingCall, uac: Uac, call: PhoneCall, endpoint: RtpEndpoint, profile: PhoneProfile
    ) -> None:
        super().__init__(call, endpoint, profile)
        self.outgoing = outgoing
        self.uac = uac
        self.rang = False  # the callee said 180/183

    @property
    def sip_call_id(self) -> str:
        return self.outgoing.call_id

    def hang_up(self) -> None:
        state = self.outgoing.dialog.state
        with contextlib.suppress(Exception):
            if state is DialogState.CONFIRMED:
                self.uac.send_bye(self.outgoing.dialog, self.outgoing.remote_addr)
            elif state is DialogState.EARLY and self.sip_call_id in self.uac.answered:
                self.uac.send_cancel(self.outgoing)  # CANCEL needs a provisional answer first
        self.uac.forget(self.sip_call_id)

    def refer(self, target: str) -> None:
        self.uac.send_refer(self.outgoing.dialog, target, self.outgoing.remote_addr)


class SipLegs:
    """The SIP calls in progress, their RTP ports (from ``rtp_port_min``-``rtp_port_max``) and
    the gauges that count them."""

    def __init__(self, host: str, low: int, high: int, metrics: TelephonyMetrics) -> None:
        self.host = host
        self.ports = PortPool(low, high)
        self.metrics = metrics
        self.by_sip: dict[str, SipLeg] = {}  # by SIP Call-ID
        self.by_call: dict[str, SipLeg] = {}  # by our call id

    def __len__(self) -> int:
        return len(self.by_sip)

    async def open_media(self, call: PhoneCall, encoding: str) -> RtpEndpoint:
        """An RTP endpoint for ``call`` on a free port; raises ``NoPortFree`` (a full range, or
        every port tried held by another program)."""
        for _ in range(BIND_TRIES):
            port = self.ports.take()
            endpoint = RtpEndpoint(
                PacedPlayout(call.on_playback, encoding),
                call.caller_audio,
                call.caller_dtmf,
                on_drop=lambda reason: self.metrics.rtp_dropped.labels(reason).inc(),
            )
            try:
                await endpoint.open(self.host, port)
            except OSError as exc:
                log.warning("RTP port %s cannot be bound (%s): trying another", port, exc)
                self.ports.give(port)
                continue
            self._count()
            return endpoint
        raise NoPortFree("no RTP port of the range could be bound")

    def add(self, leg: SipLeg) -> None:
        self.by_sip[leg.sip_call_id] = leg
        self.by_call[leg.call.id] = leg
        self._count()

    def find(self, call_id: str) -> SipLeg:
        leg = self.by_call.get(call_id)
        if leg is None or leg.call.ended:
            raise NotFound(f"no SIP call {call_id!r} is in progress", param="call_id")
        return leg

    def release(self, leg: SipLeg) -> None:
        """The call is over: its socket closes and its port goes back to the range."""
        leg.endpoint.close()
        self.ports.give(leg.endpoint.port)
        if self.by_sip.get(leg.sip_call_id) is leg:
            del self.by_sip[leg.sip_call_id]
        self.by_call.pop(leg.call.id, None)
        self._count()

    def drop_port(self, endpoint: RtpEndpoint) -> None:
        """An endpoint that never became a leg (its INVITE was refused)."""
        endpoint.close()
        self.ports.give(endpoint.port)
        self._count()

    def _count(self) -> None:
        self.metrics.sip_calls.set(len(self.by_sip))
        self.metrics.rtp_ports.set(len(self.ports.held))
