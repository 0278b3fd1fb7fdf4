"""The SIP transports omnivox listens on: aiosipua's UDP and TCP, UDP made to run on any event
loop (uvloop's datagram transport is not asyncio's class, which aiosipua asserts), and TLS (TCP
with the certificate of ``sip_tls_cert``/``sip_tls_key``; a handshake that fails or stalls past
``HANDSHAKE_TIMEOUT_S`` only closes that connection)."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field

from aiosipua import SipUAC, TcpSipTransport, UdpSipTransport
from aiosipua.message import SipResponse

HANDSHAKE_TIMEOUT_S = 5.0


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, owner: UdpSipTransport) -> None:
        self.owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.owner._udp_transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:  # type: ignore[override]
        self.owner._dispatch(data, (str(addr[0]), int(addr[1])))


class UdpTransport(UdpSipTransport):
    """aiosipua's UDP transport on any event loop."""

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: _Datagrams(self), local_addr=self.local_addr)


@dataclass
class TlsTransport(TcpSipTransport):
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
