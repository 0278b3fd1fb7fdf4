"""The SIP transports' parsing step: a message whose headers cannot be read is dropped and
counted as malformed before any handler sees it; a sound one is handed on with its Via stamped."""

from __future__ import annotations

from typing import Any

import pytest

from omnivox.gateway.telephony.transports import UdpTransport


def _invite(cseq: str = "1 INVITE", length: str = "0") -> bytes:
    return (
        "INVITE sip:100@127.0.0.1 SIP/2.0\r\n"
        "Via: SIP/2.0/UDP 127.0.0.1:5062;branch=z9hG4bK1\r\n"
        "From: <sip:alice@127.0.0.1>;tag=a\r\n"
        "To: <sip:100@127.0.0.1>\r\n"
        "Call-ID: c1\r\n"
        f"CSeq: {cseq}\r\n"
        "Contact: <sip:alice@127.0.0.1:5062>\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _transport() -> tuple[UdpTransport, list[Any], list[int]]:
    handled: list[Any] = []
    malformed: list[int] = []
    transport = UdpTransport(local_addr=("127.0.0.1", 0))
    transport.on_message = lambda message, addr: handled.append(message)
    transport.on_malformed = lambda: malformed.append(1)
    return transport, handled, malformed


@pytest.mark.parametrize(
    "data",
    [
        _invite(cseq="abc INVITE"),
        _invite(cseq="1.5 INVITE"),
        _invite(length="abc"),
    ],
)
def test_a_message_with_unreadable_headers_is_counted_malformed_and_never_handled(data) -> None:
    transport, handled, malformed = _transport()
    transport._dispatch(data, ("127.0.0.1", 5062))
    assert handled == [] and malformed == [1]


def test_a_sound_invite_is_handed_on_with_the_source_port_stamped() -> None:
    transport, handled, malformed = _transport()
    transport._dispatch(_invite(), ("127.0.0.1", 5999))
    assert malformed == [] and len(handled) == 1
    assert handled[0].cseq.seq == 1
    assert "received" not in handled[0].headers.get("via")[0]  # the Via named this host already
