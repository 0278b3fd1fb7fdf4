"""SDP offer/answer (RFC 3264) for a phone call's one audio stream: G.711 (PCMU or PCMA at 8 kHz)
and RFC 4733 telephone events. Parsing is aiosipua's; what omnivox accepts is decided here.

``answer`` takes a caller's offer and returns the plan (codec, DTMF payload type, where to send
RTP) with our answer; an offer with no G.711 audio, no address or a port 0 stream raises
``UnusableSdp`` (SIP 488). ``offer`` and ``accept_answer`` are the same for calls omnivox places.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass

from aiosipua import parse_sdp

from omnivox.core.errors import UnusableSdp

CODECS = {"PCMU": 0, "PCMA": 8}  # static payload types (RFC 3551)
MAX_SDP_BYTES = 16 * 1024
DTMF_PT = 101
DIRECTIONS = ("sendrecv", "sendonly", "recvonly", "inactive")
_NOT_RECEIVING = {
    "sendrecv": "sendonly",
    "sendonly": "sendonly",
    "recvonly": "inactive",
    "inactive": "inactive",
}


@dataclass(frozen=True)
class MediaPlan:
    """What both ends agreed for the call's audio."""

    codec: str  # "PCMU" or "PCMA"
    payload_type: int
    dtmf_payload_type: int | None  # None: the peer does not take RFC 4733 events
    remote: tuple[str, int]  # where to send RTP (and the only source RTP is taken from)
    direction: str  # the peer's: sendrecv, sendonly (hold), recvonly, inactive

    @property
    def encoding(self) -> str:
        """The realtime session's name for the codec (``audio/pcmu`` or ``audio/pcma``)."""
        return f"audio/{self.codec.lower()}"


def _parse(text: str) -> tuple[str, int, list[tuple[int, str]], int | None, str]:
    # counted in bytes: a character of non-ASCII text is 2 to 4 of them
    if len(text) > MAX_SDP_BYTES or len(text.encode(errors="replace")) > MAX_SDP_BYTES:
        raise UnusableSdp(f"the SDP is larger than {MAX_SDP_BYTES} bytes")
    if not text.lstrip().startswith("v=0"):
        raise UnusableSdp("the body is not SDP (it must start with v=0)")
    try:
        sdp = parse_sdp(text)
    except (ValueError, IndexError, KeyError) as exc:
        raise UnusableSdp(f"the SDP cannot be read: {exc}") from None
    audio = sdp.audio
    if audio is None:
        raise UnusableSdp("the SDP offers no audio")
    if not audio.proto.startswith("RTP/AVP") or audio.proto.startswith("RTP/SAVP"):
        raise UnusableSdp(f"the audio transport {audio.proto} is not plain RTP/AVP")
    connection = audio.connection or sdp.connection
    if connection is None or not connection.address:
        raise UnusableSdp("the SDP has no connection address")
    try:
        ip = ipaddress.ip_address(connection.address)
    except ValueError:
        raise UnusableSdp(f"the connection address {connection.address!r} is not an IP address") from None
    # the canonical form, as the socket reports a datagram's source ("2001:DB8:0::1" would be
    # "2001:db8::1" there, and every packet of the call dropped as a stranger's)
    address, unspecified = str(ip), ip.is_unspecified
    if not 0 < audio.port < 65536:
        raise UnusableSdp("the audio stream is disabled (port 0)")
    codecs: list[tuple[int, str]] = []
    dtmf: int | None = None
    for codec in audio.codecs:
        name = (codec.encoding_name or "").upper()
        if name == "TELEPHONE-EVENT" and codec.clock_rate == 8000:
            dtmf = codec.payload_type
        elif name in CODECS and codec.clock_rate == 8000:
            codecs.append((codec.payload_type, name))
    for fmt in audio.formats:  # static payload types need no rtpmap
        if fmt.isdigit() and int(fmt) in CODECS.values() and all(pt != int(fmt) for pt, _ in codecs):
            codecs.append((int(fmt), next(n for n, pt in CODECS.items() if pt == int(fmt))))
    order = {f: i for i, f in enumerate(audio.formats)}
    codecs.sort(key=lambda c: order.get(str(c[0]), len(order)))
    # a direction at the session level holds for every stream without one of its own (RFC 4566
    # section 6: phones that put the call on hold often write it there)
    media_direction = next((d for d in DIRECTIONS if d in audio.attributes), None)
    session_direction = next((d for d in DIRECTIONS if d in sdp.attributes), "sendrecv")
    direction = media_direction or session_direction
    if unspecified:  # c=0.0.0.0: RFC 2543's hold, still sent (RFC 3264 section 8.4): it takes no media
        direction = _NOT_RECEIVING[direction]
    return address, audio.port, codecs, dtmf, direction


@dataclass(frozen=True)
class Origin:
    """Our SDP's ``o=`` session id and version: the same id for a whole call, the version one up
    with each new description in it (a re-INVITE's answer; RFC 3264 section 8)."""

    session_id: int
    version: int

    @classmethod
    def now(cls) -> Origin:
        stamp = int(time.time())
        return cls(stamp, stamp)

    def next(self) -> Origin:
        return Origin(self.session_id, self.version + 1)


def render(
    local_ip: str,
    port: int,
    codecs: list[tuple[int, str]],
    dtmf: int | None,
    direction: str,
    origin: Origin | None = None,
) -> str:
    """Our SDP: one audio stream of ``codecs`` (payload type, name), plus telephone events."""
    origin = origin or Origin.now()
    family = "IP6" if ":" in local_ip else "IP4"
    formats = [str(pt) for pt, _ in codecs] + ([str(dtmf)] if dtmf is not None else [])
    lines = [
        "v=0",
        f"o=omnivox {origin.session_id} {origin.version} IN {family} {local_ip}",
        "s=omnivox",
        f"c=IN {family} {local_ip}",
        "t=0 0",
        f"m=audio {port} RTP/AVP {' '.join(formats)}",
        *(f"a=rtpmap:{pt} {name}/8000" for pt, name in codecs),
    ]
    if dtmf is not None:
        lines += [f"a=rtpmap:{dtmf} telephone-event/8000", f"a=fmtp:{dtmf} 0-16"]
    lines += ["a=ptime:20", f"a={direction}"]
    return "\r\n".join(lines) + "\r\n"


_ANSWER_DIRECTION = {
    "sendrecv": "sendrecv",
    "sendonly": "recvonly",
    "recvonly": "sendonly",
    "inactive": "inactive",
}


def answer(
    offer_text: str, local_ip: str, port: int, prefer: str | None = None, origin: Origin | None = None
) -> tuple[MediaPlan, str]:
    """The plan for a caller's offer and our SDP answer (as ``origin``: the call's); raises
    ``UnusableSdp``. The offerer's first G.711 codec is taken, or ``prefer`` where the offer has it
    (a re-INVITE mid-call: the session keeps the codec it speaks if it can)."""
    address, remote_port, codecs, dtmf, direction = _parse(offer_text)
    if not codecs:
        raise UnusableSdp("the offer has no G.711 audio (PCMU or PCMA at 8 kHz)")
    pt, name = next((c for c in codecs if c[1] == prefer), codecs[0])
    plan = MediaPlan(name, pt, dtmf, (address, remote_port), direction)
    answered = _ANSWER_DIRECTION.get(direction, "sendrecv")
    return plan, render(local_ip, port, [(pt, name)], dtmf, answered, origin)


def offer(local_ip: str, port: int, origin: Origin | None = None) -> str:
    """Our offer for a call omnivox places: PCMU, PCMA and telephone events."""
    return render(local_ip, port, [(0, "PCMU"), (8, "PCMA")], DTMF_PT, "sendrecv", origin)


def accept_answer(answer_text: str) -> MediaPlan:
    """The plan a callee's answer to ``offer`` sets; raises ``UnusableSdp``."""
    address, remote_port, codecs, dtmf, direction = _parse(answer_text)
    if not codecs:
        raise UnusableSdp("the answer has no G.711 audio (PCMU or PCMA at 8 kHz)")
    pt, name = codecs[0]
    return MediaPlan(name, pt, dtmf, (address, remote_port), direction)
