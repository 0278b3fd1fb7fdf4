"""The SIP transports omnivox listens on: aiosipua's UDP and TCP, UDP made to run on any event
loop (uvloop's datagram transport is not asyncio's class, which aiosipua asserts), TCP answering
on the connection a request came on (RFC 3261 section 18.2.2; aiosipua would look for one to the
Via's sent-by port, which a client need not listen on), and TLS (that TCP with the certificate
of ``sip_tls_cert``/``sip_tls_key``; a handshake that fails or stalls past
``HANDSHAKE_TIMEOUT_S`` only closes that connection)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from aiosipua import SipUAC, TcpSipTransport, UdpSipTransport
from aiosipua.headers import parse_via, stringify_via
from aiosipua.message import SipMessage, SipRequest, SipResponse
from aiosipua.transport import SipTransport

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 5.0


def _check_headers(message: SipMessage) -> None:
    """Parse every header the dialog layer reads later, so that a hostile value (a CSeq of
    "abc", a port past 65535) fails here, as malformed, rather than deep inside a handler."""
    _ = (message.via, message.from_addr, message.to_addr, message.cseq, message.contact)
    _ = message.content_length


def _deliver(transport: SipTransport, data: bytes, addr: tuple[str, int], on_connection: bool) -> None:
    """Parse one message and hand it on; bytes that are not SIP are dropped and counted
    (``malformed``), quietly: a flood of junk must not become a flood of tracebacks in the log.
    ``on_connection``: the answer goes back on the connection the request came on."""
    try:
        message = SipMessage.parse(data)
        _check_headers(message)
        if isinstance(message, SipRequest) and (vias := message.headers.get("via")):
            via = parse_via(vias[0])
            if on_connection or via.host != addr[0] or ("rport" in via.params and not via.params["rport"]):
                via.params["received"] = addr[0]
            if on_connection or ("rport" in via.params and not via.params["rport"]):
                via.params["rport"] = str(addr[1])
            message.headers.remove("Via")
            for value in [stringify_via(via), *vias[1:]]:
                message.headers.append("Via", value)
    except Exception:  # aiosipua's parser raises what it meets (ValueError, IndexError, ...)
        log.debug("not SIP from %s", addr)
        malformed = getattr(transport, "on_malformed", None)
        if malformed is not None:
            malformed()
        return
    if transport.on_message is not None:
        try:
            transport.on_message(message, addr)
        except Exception:
            log.exception("SIP message from %s could not be handled", addr)


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, owner: UdpSipTransport) -> None:
        self.owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.owner._udp_transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.owner._dispatch(data, (str(addr[0]), int(addr[1])))


class UdpTransport(UdpSipTransport):
    """aiosipua's UDP transport on any event loop."""

    on_malformed: Callable[[], None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: _Datagrams(self), local_addr=self.local_addr)

    def _dispatch(self, data: bytes, addr: tuple[str, int]) -> None:
        _deliver(self, data, addr, on_connection=False)


class TcpTransport(TcpSipTransport):
    """TCP whose responses go back on the request's own connection: each request's top Via is
    stamped with the connection's address (``received``, ``rport``), which aiosipua routes by."""

    on_malformed: Callable[[], None] | None = None

    def _dispatch(self, data: bytes, addr: tuple[str, int]) -> None:
        _deliver(self, data, addr, on_connection=True)


@dataclass
class TlsTransport(TcpTransport):
    """SIP over TLS (RFC 3261 section 26.2): TCP framing inside a TLS server socket."""

    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle_connection,
            host=self.local_addr[0],
            port=self.local_addr[1],
            ssl=self.ssl_context,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
        )


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context for ``cert`` (PEM chain) and ``key`` (PEM); raises ``OSError`` or
    ``ssl.SSLError`` when they cannot be read."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


class Uac(SipUAC):
    """aiosipua's UAC, noting which outbound calls have heard any answer at all (a UDP INVITE
    with none yet is sent again, as RFC 3261's timer A does)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.answered: set[str] = set()  # SIP Call-IDs

    def handle_response(self, response: SipResponse, addr: tuple[str, int]) -> None:
        if response.call_id and response.call_id in self._calls:
            self.answered.add(response.call_id)
        super().handle_response(response, addr)

    def forget(self, call_id: str) -> None:
        self.remove_call(call_id)
        self.answered.discard(call_id)
