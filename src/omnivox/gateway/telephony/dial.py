"""Calls omnivox places (``POST {path}/calls/dial``, an omnivox extension): an INVITE to the
configured trunk (``sip_trunk``, with digest credentials when ``sip_trunk_user`` is set) for a
number, or straight to a ``sip:`` URI; the agent runs once the callee answers.

    {"to": "+15550001111" | "sip:bob@198.51.100.7:5060", "from": "+15550002222",
     "session": {...} | "profile": "sales", "timeout_s": 30, "wait": true}

The call is held (``/hangup`` and sidebands find it) from the INVITE on, and takes a worker only
once answered. With ``wait`` (the default) the request returns when the call is answered (201) or
fails (502 ``dial_failed`` with ``outcome`` and ``sip_status``); without it at once, and sidebands
hear the failure as an ``error`` event. Outcomes: ``busy`` (486, 600), ``no_answer`` (it rang
until ``timeout_s``, then a CANCEL; 408, 480), ``rejected`` (any other final refusal, an answer
with no G.711), ``timeout`` (no answer of any kind: nothing listens there), ``unreachable`` (the
host cannot be resolved), ``cancelled`` (hung up while ringing). INVITEs over UDP are sent again
until something answers (RFC 3261's timer A: 0.5 s, doubling to 4 s).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiosipua import SipDigestAuth, parse_sdp, serialize_sdp

from omnivox.core.config import PhoneProfile, Settings
from omnivox.core.errors import DialFailed, InvalidMessage, SessionLimitReached, UnusableSdp
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.telephony.call import PhoneCall, start_call
from omnivox.gateway.telephony.legs import OutboundLeg, SipLeg, SipLegs
from omnivox.gateway.telephony.metrics import TelephonyMetrics
from omnivox.gateway.telephony.profiles import opening, profile_for
from omnivox.gateway.telephony.transports import Uac
from omnivox.protocol.spec import WireProtocol
from omnivox.telephony import sdp
from omnivox.telephony.playout import PacedPlayout
from omnivox.telephony.rtp_endpoint import NoPortFree

log = logging.getLogger(__name__)

USER_AGENT = "omnivox"
RETRANSMIT_FIRST_S, RETRANSMIT_MAX_S = 0.5, 4.0
_NUMBER = re.compile(r"^\+?[0-9*#]{1,32}$")
_USER = re.compile(r"^[A-Za-z0-9+_.!~*'()&=$,;?/-]{1,64}$")  # a SIP URI's user part, unescaped


class DialOutcome(StrEnum):
    ANSWERED = "answered"
    BUSY = "busy"
    NO_ANSWER = "no_answer"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    CANCELLED = "cancelled"


def outcome_of(status: int) -> DialOutcome:
    """What a final refusal means."""
    if status in (486, 600):
        return DialOutcome.BUSY
    if status in (408, 480, 487):
        return DialOutcome.NO_ANSWER
    return DialOutcome.REJECTED


@dataclass(frozen=True)
class DialRequest:
    to: str
    caller: str
    session: dict[str, Any] | None
    profile: PhoneProfile
    timeout_s: float
    wait: bool

    @classmethod
    def parse(cls, body: dict[str, Any], settings: Settings, protocol: WireProtocol) -> DialRequest:
        """The request's fields, checked; raises ``InvalidMessage`` naming the field."""
        to = body.get("to")
        if not isinstance(to, str) or not (_NUMBER.match(to) or _sip_uri(to)):
            raise InvalidMessage("to must be a phone number (+15550001111) or a sip: URI", param="to")
        if _NUMBER.match(to) and not settings.sip_trunk:
            raise InvalidMessage("dialling a number needs a trunk (sip_trunk); give a sip: URI", param="to")
        caller = body.get("from", "omnivox")
        if not isinstance(caller, str) or not _USER.match(caller):
            raise InvalidMessage("from must be a number or a SIP user name", param="from")
        session = body.get("session")
        if session is not None:
            if not isinstance(session, dict):
                raise InvalidMessage("session must be a session object", param="session")
            session = {k: v for k, v in session.items() if k != "type"}
            protocol.session_defaults(session)  # raises InvalidMessage naming the field
        name = body.get("profile")
        if name is not None and (not isinstance(name, str) or name not in settings.phone_profiles):
            raise InvalidMessage(f"no phone profile {name!r} (phone_profiles)", param="profile")
        profile = settings.phone_profiles[name] if name is not None else profile_for(settings, None)
        timeout = body.get("timeout_s", settings.sip_dial_timeout_s)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 1 <= timeout <= 300:
            raise InvalidMessage("timeout_s must be 1 to 300 seconds", param="timeout_s")
        wait = body.get("wait", True)
        if not isinstance(wait, bool):
            raise InvalidMessage("wait must be true or false", param="wait")
        return cls(to, caller, session or None, profile, float(timeout), wait)


def _sip_uri(text: str) -> re.Match[str] | None:
    return re.match(
        r"^sip:(?:([^@\s<>\"]{1,64})@)?([A-Za-z0-9.\-]{1,253}|\[[0-9a-fA-F:.]+\])(?::(\d{1,5}))?$", text
    )


@dataclass(frozen=True)
class Target:
    uri: str  # the Request-URI
    addr: tuple[str, int]  # where the INVITE goes
    trunk: bool  # through the configured trunk (its credentials apply)


async def resolve(to: str, settings: Settings) -> Target:
    """Where a call to ``to`` goes; raises ``DialFailed`` (unreachable) for a host with no address."""
    if _NUMBER.match(to):
        trunk = _sip_uri(settings.sip_trunk or "")
        if trunk is None:
            raise InvalidMessage("sip_trunk is not a sip:host[:port] URI", param="to")
        host, port = trunk.group(2), int(trunk.group(3) or 5060)
        uri, is_trunk = f"sip:{to}@{host}" + (f":{port}" if trunk.group(3) else ""), True
    else:
        found = _sip_uri(to)
        assert found is not None
        host, port, uri, is_trunk = found.group(2), int(found.group(3) or 5060), to, False
    if not 0 < port < 65536:
        raise InvalidMessage("the port is not a port", param="to")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host.strip("[]"), port, family=socket.AF_INET, type=socket.SOCK_DGRAM
        )
    except OSError:
        raise DialFailed(f"{host} has no address", outcome=DialOutcome.UNREACHABLE.value) from None
    return Target(uri, (str(infos[0][4][0]), port), is_trunk)


class Dialer:
    """Places calls through the SIP edge's UAC (UDP) and runs each as a ``PhoneCall``."""

    def __init__(
        self,
        ctx: GatewayContext,
        protocol: WireProtocol,
        legs: SipLegs,
        uac: Uac,
        advertise: str,
        metrics: TelephonyMetrics,
        ended: Callable[[SipLeg, str], None],
    ) -> None:
        self.ctx = ctx
        self.ended = ended  # what the SIP edge does when a call ends (hang up, free the port)
        self.protocol = protocol
        self.legs = legs
        self.uac = uac
        self.advertise = advertise
        self.metrics = metrics
        self._tasks: set[asyncio.Task[Any]] = set()

    async def dial(self, request: DialRequest) -> PhoneCall:
        """Place the call; with ``request.wait``, return once it is answered (raises
        ``DialFailed``), else at once."""
        settings: Settings = self.ctx.settings
        if len(self.legs) >= settings.sip_max_calls:
            raise SessionLimitReached(f"already {settings.sip_max_calls} SIP calls (sip_max_calls)")
        target = await resolve(request.to, settings)
        assert self.protocol.phone is not None
        call = PhoneCall(
            "sip", self.protocol.phone, "audio/pcmu", idle_timeout_s=request.profile.idle_timeout_s
        )
        try:
            endpoint = await self.legs.open_media(call, call.encoding)
        except NoPortFree as exc:
            raise SessionLimitReached(str(exc)) from None
        auth = None
        if target.trunk and settings.sip_trunk_user:
            auth = SipDigestAuth(settings.sip_trunk_user, settings.sip_trunk_password or "")
        origin = sdp.Origin.now()
        outgoing = self.uac.send_invite(
            f"sip:{request.caller}@{self.advertise}",
            target.uri,
            target.addr,
            parse_sdp(sdp.offer(self.advertise, endpoint.port, origin)),
            user_agent=USER_AGENT,
            auth=auth,
        )
        leg = OutboundLeg(outgoing, self.uac, call, endpoint, request.profile)
        leg.origin = origin
        call.on_end = lambda reason: self.ended(leg, reason)
        self.legs.add(leg)
        call.info = {
            "direction": "outbound",
            "from": request.caller,
            "to": request.to,
            "sip_call_id": leg.sip_call_id,
        }
        outcome: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

        def settle(value: int | None) -> None:
            if not outcome.done():
                outcome.set_result(value)

        outgoing.on_ringing = lambda _: setattr(leg, "rang", True)
        outgoing.on_answer = lambda _: settle(None)
        outgoing.on_rejected = lambda _, status, reason: settle(status)

        def session_opening() -> list[str]:
            assert self.protocol.phone is not None
            keypad = leg.plan is not None and leg.plan.dtmf_payload_type is not None  # (the answer's)
            return opening(
                self.protocol.phone, request.profile, call.encoding, request.session, keypad=keypad
            )

        start_call(self.ctx, self.protocol, call, session_opening, None)
        settled = asyncio.ensure_future(self._settle(leg, outcome, request))
        self._tasks.add(settled)
        settled.add_done_callback(self._tasks.discard)
        if request.wait:
            await asyncio.shield(settled)
        else:
            settled.add_done_callback(lambda t: t.cancelled() or t.exception())  # told to sidebands
        return call

    async def _settle(
        self, leg: OutboundLeg, outcome: asyncio.Future[int | None], request: DialRequest
    ) -> None:
        """Wait for the callee's answer; start the media, or fail the call with its outcome."""
        call = leg.call
        resend = asyncio.ensure_future(self._resend(leg))
        ended = asyncio.ensure_future(call.wait_ended())
        try:
            waits: set[asyncio.Future[Any]] = {outcome, ended}
            await asyncio.wait(waits, timeout=request.timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            resend.cancel()
            ended.cancel()
        if not outcome.done():
            if call.ended:
                self._failed(leg, DialOutcome.CANCELLED, None, "the call was hung up before it was answered")
            heard = leg.sip_call_id in self.uac.answered
            kind = DialOutcome.NO_ANSWER if leg.rang or heard else DialOutcome.TIMEOUT
            said = "it rang" if leg.rang else ("it answered" if heard else "nothing answered")
            self._failed(
                leg, kind, None, f"{request.to} did not answer within {request.timeout_s:g} s ({said})"
            )
        status = outcome.result()
        if status is not None:
            leg.remote_hung_up = True  # a final refusal ends the INVITE: nothing to send
            kind = outcome_of(status)
            self._failed(leg, kind, status, f"{request.to} answered {status} ({kind.value})")
        self._answered(leg)

    def _answered(self, leg: OutboundLeg) -> None:
        answer = leg.outgoing.sdp_answer
        try:
            plan = sdp.accept_answer(serialize_sdp(answer) if answer is not None else "")
        except UnusableSdp as err:
            self._failed(leg, DialOutcome.REJECTED, None, f"the callee's answer is unusable: {err.message}")
        call, endpoint = leg.call, leg.endpoint
        leg.plan = plan
        leg.decided.set()
        call.encoding = plan.encoding
        endpoint.playout = PacedPlayout(call.on_playback, plan.encoding)
        endpoint.start(plan)
        call.answered(endpoint.playout)
        self.metrics.dials.labels(DialOutcome.ANSWERED.value).inc()
        log.info("sip call %s to %s answered (%s)", call.id, call.info.get("to"), plan.codec)

    def _failed(self, leg: OutboundLeg, kind: DialOutcome, status: int | None, message: str) -> None:
        leg.decided.set()
        self.metrics.dials.labels(kind.value).inc()
        err = DialFailed(message, outcome=kind.value, sip_status=status)
        leg.call.fail(err)
        raise err

    async def _resend(self, leg: OutboundLeg) -> None:
        """The INVITE again until anything answers it (UDP loses datagrams)."""
        wait = RETRANSMIT_FIRST_S
        while True:
            await asyncio.sleep(wait)
            if leg.sip_call_id in self.uac.answered or leg.call.ended:
                return
            self.uac.transport.send(leg.outgoing.invite, leg.outgoing.remote_addr)
            wait = min(wait * 2, RETRANSMIT_MAX_S)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
