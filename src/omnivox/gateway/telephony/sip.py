"""SIP calls, as OpenAI serves them: with ``--sip-port P`` the gateway is a SIP user agent on P
(UDP and TCP) that answers INVITEs with SDP for G.711 and telephone events, carries RTP both ways,
and runs each call as a ``PhoneCall`` session through the one client edge.

Who may call (``admit``): with no key configured omnivox listens on loopback only and takes calls
from there; otherwise a caller needs a source address in ``sip_allow`` or SIP digest credentials
from ``sip_users`` (401 challenge, then 403 for wrong ones); anyone else gets 403, counted, and
never a session. At most ``sip_max_calls`` calls (486), ``sip_invite_rate`` INVITEs a second from
one source (503), an offer without G.711 gets 488, and no free RTP port 503. A call's RTP port goes
back to the pool however it ends.

Incoming calls fire the webhook (``realtime.call.incoming``) when one is configured and ring until
the application accepts, rejects or refers them (``calls``); without one they are accepted at once
with the agent profile of the dialled number. BYE from either side ends the call; CANCEL before the
answer ends it too; a re-INVITE is answered with the same media (a hold is heard as silence).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiosipua import IncomingCall, SipUAS, TcpSipTransport, UdpSipTransport, parse_sdp

from omnivox.core.config import PhoneProfile, Settings
from omnivox.core.errors import CallNotRinging, NotFound, TooManySessions, UnusableSdp
from omnivox.core.ids import new_id
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.client import serve_session
from omnivox.gateway.edges.limits import ClientLimits
from omnivox.gateway.telephony.call import PhoneCall
from omnivox.gateway.telephony.profiles import opening, profile_for
from omnivox.protocol.spec import WireProtocol
from omnivox.telephony import sdp, webhooks
from omnivox.telephony.digest import DigestAuth
from omnivox.telephony.playout import PacedPlayout
from omnivox.telephony.rtp_endpoint import NoPortFree, PortPool, RtpEndpoint

log = logging.getLogger(__name__)

USER_AGENT = "omnivox"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, owner: UdpSipTransport) -> None:
        self.owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.owner._udp_transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:  # type: ignore[override]
        self.owner._dispatch(data, (str(addr[0]), int(addr[1])))


class UdpTransport(UdpSipTransport):
    """aiosipua's UDP transport on any event loop (its own asserts asyncio's transport class,
    which uvloop's is not)."""

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: _Datagrams(self), local_addr=self.local_addr)


@dataclass
class SipLeg:
    """A SIP call's signalling and media, beside its ``PhoneCall``."""

    incoming: IncomingCall
    call: PhoneCall
    endpoint: RtpEndpoint
    plan: sdp.MediaPlan
    answer_sdp: str
    profile: PhoneProfile
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    remote_hung_up: bool = False


class SipEdge:
    """The gateway's SIP user agent."""

    def __init__(self, ctx: GatewayContext, protocol: WireProtocol) -> None:
        self.ctx = ctx
        self.protocol = protocol
        self.settings: Settings = ctx.settings
        s = self.settings
        self.host = s.sip_host or s.host
        self.advertise = s.sip_advertise or (self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1")
        self.ports = PortPool(s.rtp_port_min, s.rtp_port_max)
        self.digest = DigestAuth(s.sip_realm, dict(s.sip_users)) if s.sip_users else None
        self.allow = [ipaddress.ip_network(a, strict=False) for a in s.sip_allow]
        self.legs: dict[str, SipLeg] = {}  # by SIP Call-ID
        self.by_call: dict[str, SipLeg] = {}  # by our call id
        self.refused = 0
        self.invites = ClientLimits(0, s.sip_invite_rate, s.sip_invite_burst)  # INVITEs per source
        self._uas: list[SipUAS] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        assert self.settings.sip_port is not None
        addr = (self.host, self.settings.sip_port)
        for transport in (UdpTransport(local_addr=addr), TcpSipTransport(local_addr=addr)):
            uas = SipUAS(transport, user_agent=USER_AGENT, advertised_addr=(self.advertise, addr[1]))
            uas.on_invite = self._on_invite
            uas.on_bye = self._on_bye
            uas.on_cancel = self._on_cancel
            uas.on_reinvite = self._on_reinvite
            await uas.start()
            self._uas.append(uas)
        log.info("SIP listening on %s:%s (UDP, TCP)", *addr)

    async def stop(self) -> None:
        for leg in list(self.legs.values()):
            leg.call.end("the gateway is shutting down")
        for uas in self._uas:
            with contextlib.suppress(Exception):
                await uas.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- who may call

    def _admit(self, incoming: IncomingCall) -> tuple[int, dict[str, str]] | None:
        """None when the INVITE may proceed, else the SIP status (and headers) that refuse it."""
        s = self.settings
        source = incoming.source_addr[0]
        if s.key_for("client") is None:  # no key: loopback only (serve's own worker key is no client key)
            if source not in LOOPBACK:
                return 403, {}
        else:
            try:
                address = ipaddress.ip_address(source)
            except ValueError:
                return 403, {}
            if not any(address in net for net in self.allow):
                if self.digest is None:
                    return 403, {}
                authorization = incoming.invite.get_header("authorization")
                if authorization is None:
                    return 401, {"WWW-Authenticate": self.digest.challenge()}
                if self.digest.check("INVITE", authorization) is None:
                    return 403, {}
        try:
            with self.invites.admit(source):
                pass
        except TooManySessions:
            return 503, {"Retry-After": "1"}
        if len(self.legs) >= s.sip_max_calls:
            return 486, {}
        return None

    # ---- INVITE

    def _on_invite(self, incoming: IncomingCall) -> None:
        refusal = self._admit(incoming)
        if refusal is not None:
            status, headers = refusal
            if status in (401, 403):
                self.refused += 1
                self.ctx.metrics.error("sip_forbidden" if status == 403 else "sip_challenged")
            self._reply(incoming, status, headers)
            return
        self._spawn(self._offered(incoming))

    def _reply(self, incoming: IncomingCall, status: int, headers: dict[str, str] | None = None) -> None:
        with contextlib.suppress(Exception):
            incoming._send_response(status, _REASONS.get(status, "Error"), extra_headers=headers or None)
            incoming.dialog.terminate()
        for uas in self._uas:
            uas._calls.pop(incoming.call_id, None)

    async def _offered(self, incoming: IncomingCall) -> None:
        try:
            port = self.ports.take()
        except NoPortFree:
            self._reply(incoming, 503)
            return
        try:
            plan, answer = sdp.answer(incoming.invite.text or "", self.advertise, port)
        except UnusableSdp as err:
            self.ports.give(port)
            self.ctx.metrics.error(err.code)
            self._reply(incoming, 488)
            return
        to_user = incoming.callee
        profile = profile_for(self.settings, to_user)
        call = PhoneCall("sip", self.protocol.phone, plan.encoding, idle_timeout_s=profile.idle_timeout_s)  # type: ignore[arg-type]
        endpoint = RtpEndpoint(
            PacedPlayout(call.on_playback, plan.encoding), call.caller_audio, call.caller_dtmf
        )
        try:
            await endpoint.open(self.host, port)
        except OSError:
            self.ports.give(port)
            self._reply(incoming, 503)
            return
        leg = SipLeg(incoming, call, endpoint, plan, answer, profile)
        call.on_end = lambda reason: self._ended(leg, reason)
        call.info = {
            "from": incoming.caller,
            "to": incoming.callee,
            "sip_call_id": incoming.call_id,
            "sip_headers": _headers(incoming),
        }
        self.legs[incoming.call_id] = leg
        self.by_call[call.id] = leg
        if self.settings.sip_webhook_url:
            with contextlib.suppress(Exception):
                incoming.ringing()
            self._spawn(self._ring(leg))
        else:
            self.accept(call.id, None)

    async def _ring(self, leg: SipLeg) -> None:
        """Tell the application (the webhook), then wait for its decision."""
        s = self.settings
        body = json.dumps(
            {
                "object": "event",
                "id": new_id("evt"),
                "type": "realtime.call.incoming",
                "created_at": int(time.time()),
                "data": {"call_id": leg.call.id, "sip_headers": leg.call.info["sip_headers"]},
            }
        ).encode()
        headers = {"content-type": "application/json"}
        if s.sip_webhook_secret:
            headers.update(webhooks.sign(s.sip_webhook_secret, new_id("msg"), body))
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = await client.post(s.sip_webhook_url or "", content=body, headers=headers)
            if answer.status_code >= 300:
                log.warning("the call webhook answered %s", answer.status_code)
        except httpx.HTTPError as exc:
            log.warning("the call webhook failed: %s", exc)
        try:
            await asyncio.wait_for(leg.decided.wait(), s.sip_answer_timeout_s)
        except TimeoutError:
            self._refuse(leg, 480)

    # ---- the application's decisions

    def _ringing(self, call_id: str) -> SipLeg:
        leg = self.by_call.get(call_id)
        if leg is None or leg.call.ended:
            raise NotFound(f"no call {call_id!r} is in progress", param="call_id")
        if leg.decided.is_set():
            raise CallNotRinging(f"call {call_id!r} was already answered or refused")
        return leg

    def accept(self, call_id: str, session: dict[str, Any] | None) -> None:
        """Answer a ringing call and start its session (``session``: the application's config,
        else the profile's)."""
        leg = self._ringing(call_id)
        leg.decided.set()
        assert self.protocol.phone is not None
        preamble = opening(self.protocol.phone, leg.profile, leg.plan.encoding, session)
        leg.incoming.accept(parse_sdp(leg.answer_sdp))
        leg.endpoint.start(leg.plan)
        leg.call.answered(leg.endpoint.playout)
        host = leg.incoming.source_addr[0]

        async def run_session(c: PhoneCall) -> None:
            await serve_session(c, self.protocol, self.ctx, c.id, {}, {}, preamble, host)

        self.ctx.calls.start(leg.call, run_session)

    def reject(self, call_id: str, status: int) -> None:
        leg = self._ringing(call_id)
        self._refuse(leg, status)

    def _refuse(self, leg: SipLeg, status: int) -> None:
        leg.decided.set()
        self._reply(leg.incoming, status)
        leg.call.end(f"refused ({status})")

    def refer(self, call_id: str, target: str) -> None:
        """Transfer a call: a REFER to ``target`` (an answered call), or 302 to it (a ringing one)."""
        leg = self.by_call.get(call_id)
        if leg is None or leg.call.ended:
            raise NotFound(f"no call {call_id!r} is in progress", param="call_id")
        if not leg.decided.is_set():
            leg.decided.set()
            self._reply(leg.incoming, 302, {"Contact": f"<{target}>"})
            leg.call.end(f"redirected to {target}")
            return
        incoming = leg.incoming
        local = incoming._signaling_addr()
        refer = incoming.dialog.create_request("REFER", via_host=local[0], via_port=local[1])
        refer.headers.set_single("Refer-To", f"<{target}>")
        refer.headers.set_single("Referred-By", f"<{incoming.dialog.local_uri}>")
        refer.headers.set_single("Contact", f"<sip:{local[0]}:{local[1]}>")
        incoming.transport.send(refer, incoming.source_addr)  # type: ignore[union-attr]
        leg.call.info["referred_to"] = target

    # ---- the caller's side

    def _on_bye(self, incoming: IncomingCall, request: Any) -> None:
        leg = self.legs.get(incoming.call_id)
        if leg is not None:
            leg.remote_hung_up = True
            leg.call.end("the caller hung up (BYE)")

    def _on_cancel(self, request: Any, addr: tuple[str, int]) -> None:
        leg = self.legs.get(request.call_id or "")
        if leg is not None and not leg.decided.is_set():
            leg.decided.set()
            leg.remote_hung_up = True
            leg.call.end("the caller cancelled")

    def _on_reinvite(self, incoming: IncomingCall) -> None:
        """A re-INVITE (a hold, a refresh): answered with the same media; a new address or codec
        is taken if the offer has one we can use, else refused with 488 and the call goes on."""
        leg = self.legs.get(incoming.call_id)
        if leg is None:
            return
        try:
            plan, answer = sdp.answer(incoming.invite.text or "", self.advertise, leg.endpoint.port)
        except UnusableSdp:
            incoming._send_response(488, "Not Acceptable Here")
            return
        if plan.codec == leg.plan.codec:
            leg.plan, leg.answer_sdp = plan, answer
            leg.endpoint.start(plan)
        incoming._send_response(200, "OK", body=leg.answer_sdp, content_type="application/sdp")

    # ---- ending

    def _ended(self, leg: SipLeg, reason: str) -> None:
        leg.decided.set()
        if not leg.remote_hung_up:
            with contextlib.suppress(Exception):
                leg.incoming.hangup()  # a BYE (None before the answer: refused by then)
        leg.endpoint.close()
        self.ports.give(leg.endpoint.port)
        self.legs.pop(leg.incoming.call_id, None)
        self.by_call.pop(leg.call.id, None)
        for uas in self._uas:
            uas._calls.pop(leg.incoming.call_id, None)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _user(uri: str) -> str | None:
    """The user part of a SIP URI (the dialled number): ``sip:+1555@host`` -> ``+1555``."""
    rest = uri.split(":", 1)[-1]
    return rest.split("@", 1)[0] if "@" in rest else None


def _headers(incoming: IncomingCall) -> list[dict[str, str]]:
    """The INVITE's headers, as OpenAI's webhook lists them (``[{name, value}]``)."""
    out: list[dict[str, str]] = []
    for name, values in incoming.invite.headers.items():
        for value in values if isinstance(values, list) else [values]:
            out.append({"name": name, "value": str(value)})
    return out[:64]


_REASONS = {
    302: "Moved Temporarily",
    401: "Unauthorized",
    403: "Forbidden",
    480: "Temporarily Unavailable",
    486: "Busy Here",
    488: "Not Acceptable Here",
    503: "Service Unavailable",
    603: "Decline",
}
