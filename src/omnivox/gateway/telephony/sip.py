"""SIP calls, as OpenAI serves them: with ``--sip-port P`` the gateway is a SIP user agent on P
(UDP and TCP; TLS on ``sip_tls_port`` with ``sip_tls_cert``/``sip_tls_key``) that answers INVITEs
with SDP for G.711 and telephone events, carries RTP both ways, and runs each call as a
``PhoneCall`` session through the one client edge. It places calls too (``dial``: ``dial.py``).

Who may call (``admit``): with no key configured omnivox listens on loopback only and takes calls
from there; otherwise a caller needs a source address in ``sip_allow`` or SIP digest credentials
from ``sip_users`` (401 challenge, then 403 for wrong ones); anyone else gets 403, counted, and
never a session. At most ``sip_max_calls`` calls (486), ``sip_invite_rate`` INVITEs a second from
one source (503), an offer without G.711 gets 488, and no free RTP port 503. A call's RTP port goes
back to the range however it ends (``legs.SipLegs``).

Incoming calls fire the webhook (``realtime.call.incoming``) when one is configured and ring until
the application accepts, rejects or refers them; without one they are accepted at once with the
agent profile of the dialled number. BYE from either side ends the call; CANCEL before the answer
ends it too; a re-INVITE is answered with the same media (a hold is heard as silence), or 488 when
its offer has nothing usable (the call goes on).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import time
from typing import Any

import httpx
from aiosipua import DialogState, IncomingCall, SipUAS, parse_sdp
from aiosipua.transport import SipTransport

from omnivox.core.config import Settings
from omnivox.core.errors import CallNotRinging, NotFound, TooManySessions, UnusableSdp
from omnivox.core.ids import new_id
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.limits import ClientLimits
from omnivox.gateway.telephony.call import PhoneCall, PhoneState, start_call
from omnivox.gateway.telephony.dial import Dialer, DialRequest
from omnivox.gateway.telephony.legs import InboundLeg, SipLeg, SipLegs
from omnivox.gateway.telephony.metrics import TelephonyMetrics
from omnivox.gateway.telephony.profiles import opening, profile_for
from omnivox.gateway.telephony.transports import TcpTransport, TlsTransport, Uac, UdpTransport, tls_context
from omnivox.protocol.spec import WireProtocol
from omnivox.telephony import sdp, webhooks
from omnivox.telephony.digest import DigestAuth
from omnivox.telephony.rtp_endpoint import NoPortFree

log = logging.getLogger(__name__)

USER_AGENT = "omnivox"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class SipEdge:
    """The gateway's SIP user agent."""

    def __init__(self, ctx: GatewayContext, protocol: WireProtocol) -> None:
        self.ctx = ctx
        self.protocol = protocol
        self.settings: Settings = ctx.settings
        s = self.settings
        self.host = s.sip_host or s.host
        self.advertise = s.sip_advertise or (self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1")
        self.metrics = TelephonyMetrics(ctx.metrics.registry)
        self.legs = SipLegs(self.host, s.rtp_port_min, s.rtp_port_max, self.metrics)
        self.digest = DigestAuth(s.sip_realm, dict(s.sip_users)) if s.sip_users else None
        self.allow = [ipaddress.ip_network(a, strict=False) for a in s.sip_allow]
        self.invites = ClientLimits(0, s.sip_invite_rate, s.sip_invite_burst)  # INVITEs per source
        self.dialer: Dialer | None = None
        self._setting_up: dict[str, IncomingCall] = {}  # INVITEs whose media is being opened
        self._uas: list[SipUAS] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            # aiosipua warns of every bad message it meets; omnivox counts them (refusals by status,
            # malformed messages) instead: hostile traffic must not flood the log
            logging.getLogger("aiosipua").setLevel(logging.ERROR)
        s = self.settings
        assert s.sip_port is not None
        addr = (self.host, s.sip_port)
        transports: list[tuple[SipTransport, int]] = [
            (UdpTransport(local_addr=addr), s.sip_port),
            (TcpTransport(local_addr=addr), s.sip_port),
        ]
        if s.sip_tls_port is not None and s.sip_tls_cert and s.sip_tls_key:
            context = tls_context(s.sip_tls_cert, s.sip_tls_key)
            transports.append(
                (TlsTransport(local_addr=(self.host, s.sip_tls_port), ssl_context=context), s.sip_tls_port)
            )
        for transport, port in transports:
            transport.on_malformed = lambda: self.metrics.refused.labels("malformed").inc()  # type: ignore[attr-defined]
            uac = (
                Uac(transport, advertised_addr=(self.advertise, port))
                if isinstance(transport, UdpTransport)
                else None
            )
            uas = SipUAS(transport, user_agent=USER_AGENT, advertised_addr=(self.advertise, port), uac=uac)
            uas.on_invite = self._on_invite
            uas.on_bye = self._on_bye
            uas.on_cancel = self._on_cancel
            uas.on_reinvite = self._on_reinvite
            await uas.start()
            self._uas.append(uas)
            if uac is not None:
                self.dialer = Dialer(
                    self.ctx, self.protocol, self.legs, uac, self.advertise, self.metrics, self._ended
                )
        tls = f", TLS on {s.sip_tls_port}" if len(transports) > 2 else ""
        log.info("SIP listening on %s:%s (UDP, TCP%s)", *addr, tls)

    async def stop(self) -> None:
        for leg in list(self.legs.by_sip.values()):
            leg.call.end("the gateway is shutting down")
        if self.dialer is not None:
            await self.dialer.stop()
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
                if self.digest.check("INVITE", authorization, incoming.invite.uri) is None:
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
        first = self._setting_up.get(incoming.call_id)
        leg = self.legs.by_sip.get(incoming.call_id)
        if first is not None or leg is not None:
            # the same INVITE again (UDP retransmits it): aiosipua took it for a new call; the
            # dialog stays the first one's
            original = first or (leg.incoming if isinstance(leg, InboundLeg) else None)
            for uas in self._uas:
                if original is not None and uas.transport is original.transport:
                    uas._calls[incoming.call_id] = original
            return
        refusal = self._admit(incoming)
        if refusal is not None:
            status, headers = refusal
            if status == 403:
                self.ctx.metrics.error("sip_forbidden")
            self._reply(incoming, status, headers)
            return
        self._setting_up[incoming.call_id] = incoming
        self._spawn(self._offered(incoming))

    def _reply(self, incoming: IncomingCall, status: int, headers: dict[str, str] | None = None) -> None:
        """A final refusal of an INVITE (counted by status)."""
        if status >= 400:
            self.metrics.refused.labels(str(status)).inc()
        with contextlib.suppress(Exception):
            incoming._send_response(status, _REASONS.get(status, "Error"), extra_headers=headers or None)
            incoming.dialog.terminate()
        for uas in self._uas:
            uas._calls.pop(incoming.call_id, None)

    async def _offered(self, incoming: IncomingCall) -> None:
        try:
            await self._set_up(incoming)
        finally:
            self._setting_up.pop(incoming.call_id, None)

    async def _set_up(self, incoming: IncomingCall) -> None:
        profile = profile_for(self.settings, incoming.callee and _user(incoming.callee))
        assert self.protocol.phone is not None
        try:
            plan, answer = sdp.answer(incoming.invite.text or "", self.advertise, 0)
        except UnusableSdp as err:
            self.ctx.metrics.error(err.code)
            self._reply(incoming, 488)
            return
        call = PhoneCall("sip", self.protocol.phone, plan.encoding, idle_timeout_s=profile.idle_timeout_s)
        try:
            endpoint = await self.legs.open_media(call, plan.encoding)
        except NoPortFree:
            self._reply(incoming, 503)
            return
        if incoming.dialog.state is DialogState.TERMINATED:
            self.legs.drop_port(endpoint)  # cancelled while its media was being opened
            return
        origin = sdp.Origin.now()
        plan, answer = sdp.answer(incoming.invite.text or "", self.advertise, endpoint.port, origin=origin)
        leg = InboundLeg(incoming, call, endpoint, profile, plan, answer)
        leg.origin = origin
        call.on_end = lambda reason: self._ended(leg, reason)
        call.info = {
            "direction": "inbound",
            "from": incoming.caller,
            "to": incoming.callee,
            "sip_call_id": incoming.call_id,
            "sip_headers": _headers(incoming),
        }
        self.legs.add(leg)
        if self.settings.sip_webhook_url:
            with contextlib.suppress(Exception):
                incoming.ringing()
            self._spawn(self._ring(leg))
        else:
            with contextlib.suppress(NotFound):  # the caller went while its media was set up
                self.accept(call.id, None)

    async def _ring(self, leg: InboundLeg) -> None:
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

    def _ringing(self, call_id: str) -> InboundLeg:
        leg = self.legs.find(call_id)
        if not isinstance(leg, InboundLeg):
            raise NotFound(f"no incoming call {call_id!r} is in progress", param="call_id")
        if leg.decided.is_set():
            raise CallNotRinging(f"call {call_id!r} was already answered or refused")
        return leg

    def accept(self, call_id: str, session: dict[str, Any] | None) -> None:
        """Answer a ringing call and start its session (``session``: the application's config,
        else the profile's)."""
        leg = self._ringing(call_id)
        leg.decided.set()
        assert self.protocol.phone is not None and leg.plan is not None
        keypad = leg.plan.dtmf_payload_type is not None
        preamble = opening(self.protocol.phone, leg.profile, leg.plan.encoding, session, keypad=keypad)
        try:
            leg.incoming.accept(parse_sdp(leg.answer_sdp))
        except (RuntimeError, OSError) as exc:  # a TCP caller whose connection is gone
            leg.remote_hung_up = True
            leg.call.end(f"the answer could not be sent: {exc}")
            raise NotFound(
                f"call {call_id!r} is gone: its caller's connection closed", param="call_id"
            ) from None
        leg.endpoint.start(leg.plan)
        leg.call.answered(leg.endpoint.playout)
        start_call(self.ctx, self.protocol, leg.call, lambda: preamble, leg.incoming.source_addr[0])

    def reject(self, call_id: str, status: int) -> None:
        self._refuse(self._ringing(call_id), status)

    def _refuse(self, leg: InboundLeg, status: int) -> None:
        leg.decided.set()
        self._reply(leg.incoming, status)
        leg.call.end(f"refused ({status})")

    def refer(self, call_id: str, target: str) -> None:
        """Transfer a call: a REFER to ``target`` (an answered call), or 302 to it (a ringing one)."""
        leg = self.legs.find(call_id)
        if isinstance(leg, InboundLeg) and not leg.decided.is_set():
            leg.decided.set()
            self._reply(leg.incoming, 302, {"Contact": f"<{target}>"})
            leg.call.end(f"redirected to {target}")
            return
        if leg.call.state is not PhoneState.ACTIVE:
            raise CallNotRinging(f"call {call_id!r} is not answered yet: it cannot be transferred")
        leg.refer(target)
        leg.call.info["referred_to"] = target

    async def dial(self, body: dict[str, Any]) -> PhoneCall:
        """Place a call (``dial.DialRequest``); raises ``InvalidMessage``, ``DialFailed``."""
        assert self.dialer is not None
        return await self.dialer.dial(DialRequest.parse(body, self.settings, self.protocol))

    # ---- the far end's requests

    def _on_bye(self, incoming: IncomingCall, request: Any) -> None:
        leg = self.legs.by_sip.get(incoming.call_id)
        if leg is not None:
            leg.remote_hung_up = True
            leg.call.end("the far end hung up (BYE)")

    def _on_cancel(self, request: Any, addr: tuple[str, int]) -> None:
        leg = self.legs.by_sip.get(request.call_id or "")
        if leg is not None and not leg.decided.is_set():
            leg.decided.set()
            leg.remote_hung_up = True
            leg.call.end("the caller cancelled")

    def _on_reinvite(self, incoming: IncomingCall) -> None:
        """A re-INVITE (a hold, a refresh): answered with the same codec (the session speaks one for
        the whole call) and the offer's address and direction; an offer without that codec is
        refused with 488 and the call goes on as it was."""
        leg = self.legs.by_sip.get(incoming.call_id)
        if leg is None or leg.plan is None:
            return
        try:
            origin = leg.origin.next()  # the same session, its next version
            plan, answer = sdp.answer(
                incoming.invite.text or "",
                self.advertise,
                leg.endpoint.port,
                prefer=leg.plan.codec,
                origin=origin,
            )
            if plan.codec != leg.plan.codec:  # answering a codec the offer lacks breaks RFC 3264
                raise UnusableSdp(f"the offer has no {leg.plan.codec}, the codec of this call")
        except UnusableSdp:
            self.metrics.refused.labels("488").inc()
            incoming._send_response(488, "Not Acceptable Here")
            return
        leg.plan, leg.origin = plan, origin
        if isinstance(leg, InboundLeg):
            leg.answer_sdp = answer
        leg.endpoint.start(plan)  # the hold's direction too: nothing is sent while held
        leg.call.info["hold"] = plan.direction in ("sendonly", "inactive")
        incoming._send_response(200, "OK", body=answer, content_type="application/sdp")

    # ---- ending

    def _ended(self, leg: SipLeg, reason: str) -> None:
        leg.decided.set()
        if not leg.remote_hung_up:
            leg.hang_up()
        self.legs.release(leg)
        for uas in self._uas:
            uas._calls.pop(leg.sip_call_id, None)

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
