"""Hostile SIP for a live SIP port, seeded: INVITEs with headers dropped, doubled, swollen or
garbled, lying Content-Lengths, SDP that offers nothing usable (or far too much), other methods on
dialogs that do not exist, random bytes, and over TCP messages cut off mid-header and connections
dropped. ``fuzz_sip`` sends them over UDP and TCP; the caller then checks the server still serves
and holds nothing (no call, no RTP port).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass

METHODS = ("BYE", "CANCEL", "ACK", "OPTIONS", "REGISTER", "INFO", "UPDATE", "PRACK", "REFER", "NOTIFY", "FOO")


def _sdp(rng: random.Random, port: int) -> str:
    lines = [
        "v=0",
        "o=- 1 1 IN IP4 127.0.0.1",
        "s=-",
        "c=IN IP4 127.0.0.1",
        "t=0 0",
        f"m=audio {port} RTP/AVP 0 8 101",
        "a=rtpmap:0 PCMU/8000",
        "a=rtpmap:101 telephone-event/8000",
    ]
    kind = rng.randrange(12)
    if kind == 0:
        lines[5] = f"m=audio {port} RTP/AVP 9"  # G.722 only: nothing omnivox speaks
        del lines[6:]
    elif kind == 1:
        lines[3] = "c=IN IP4 not-an-address"
    elif kind == 2:
        lines[5] = "m=audio 0 RTP/AVP 0"  # disabled
    elif kind == 3:
        lines[5] = f"m=audio {rng.choice([-1, 65536, 99999999999])} RTP/AVP 0"
    elif kind == 4:
        lines += [f"a=rtpmap:{rng.randrange(256)} X/{rng.randrange(10**9)}" for _ in range(2000)]  # swollen
    elif kind == 5:
        lines[5] = "m=audio 4000 RTP/SAVP 0"  # SRTP only
    elif kind == 6:
        lines = [rng.choice(lines) for _ in range(rng.randrange(1, 12))]  # shuffled, repeated
    elif kind == 7:
        lines[0] = "v=1"
    elif kind == 8:
        lines.insert(rng.randrange(len(lines)), "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(40)))
    elif kind == 9:
        lines = lines[: rng.randrange(len(lines))]  # cut short
    return "\r\n".join(lines) + "\r\n"


def _put(headers: list[str], line: str) -> None:
    """``line`` in place of the first header of its name (found by name: earlier mutations move
    headers), or at the end where there is none (it was dropped)."""
    name = line.split(":", 1)[0] + ":"
    at = next((i for i, h in enumerate(headers) if h.startswith(name)), None)
    if at is None:
        headers.append(line)
    else:
        headers[at] = line


def invite(rng: random.Random, target: tuple[str, int], source_port: int, n: int) -> bytes:
    """One INVITE, mutated (or, now and then, not at all)."""
    body = _sdp(rng, source_port + 2)
    headers = [
        f"Via: SIP/2.0/UDP 127.0.0.1:{source_port};branch=z9hG4bKfz{n};rport",
        "Max-Forwards: 70",
        f"From: <sip:fuzz@127.0.0.1:{source_port}>;tag=f{n}",
        f"To: <sip:agent@{target[0]}:{target[1]}>",
        f"Call-ID: fuzz-{n}-{rng.getrandbits(32)}@127.0.0.1",
        "CSeq: 1 INVITE",
        f"Contact: <sip:fuzz@127.0.0.1:{source_port}>",
        "Content-Type: application/sdp",
        f"Content-Length: {len(body.encode())}",
    ]
    start = f"INVITE sip:agent@{target[0]}:{target[1]} SIP/2.0"
    for _ in range(rng.randrange(4)):
        what = rng.randrange(9)
        i = rng.randrange(len(headers))
        if what == 0:
            del headers[i]
        elif what == 1:
            headers.insert(i, headers[i])
        elif what == 2:
            headers[i] = headers[i].split(":", 1)[0] + ": " + "x" * rng.choice([1, 1000, 70_000])
        elif what == 3:
            _put(headers, f"Content-Length: {rng.choice([-5, 0, 10**12, 'abc', len(body) + 500])}")
        elif what == 4:
            headers[i] = headers[i].replace(":", "", 1)
        elif what == 5:
            start = rng.choice(
                ["INVITE", "INVITE sip:agent SIP/3.0", "INVITE  SIP/2.0", "sip:x INVITE SIP/2.0"]
            )
        elif what == 6:
            _put(
                headers,
                "CSeq: " + rng.choice(["abc INVITE", "-1 INVITE", "1 BYE", "99999999999999999999 INVITE"]),
            )
        elif what == 7:
            body = "".join(chr(rng.randrange(1, 0x10FFFF)) for _ in range(rng.randrange(1, 200)))
        else:
            headers.insert(i, "X-" + "".join(rng.choice("abc\x00\x7f\u00e9") for _ in range(20)) + ": y")
    text = "\r\n".join([start, *headers, "", body])
    return text.encode("utf-8", "surrogatepass")


def other(rng: random.Random, target: tuple[str, int], source_port: int, n: int) -> bytes:
    """A request of another method, on a dialog that does not exist (or random bytes)."""
    if rng.random() < 0.2:
        return rng.randbytes(rng.randrange(1, 1500))
    method = rng.choice(METHODS)
    return (
        f"{method} sip:agent@{target[0]}:{target[1]} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:{source_port};branch=z9hG4bKo{n}\r\n"
        f"From: <sip:fuzz@127.0.0.1>;tag=o{n}\r\nTo: <sip:agent@{target[0]}>;tag=nobody\r\n"
        f"Call-ID: other-{n}@127.0.0.1\r\nCSeq: 2 {method}\r\nContent-Length: 0\r\n\r\n"
    ).encode()


def messages(seed: int, target: tuple[str, int], source_port: int, n: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    for i in range(n):
        yield (
            invite(rng, target, source_port, i) if rng.random() < 0.7 else other(rng, target, source_port, i)
        )


@dataclass
class FuzzStats:
    sent_udp: int = 0
    sent_tcp: int = 0
    answers: int = 0  # SIP responses that came back
    tcp_dropped: int = 0  # connections the server closed on us


async def fuzz_sip(target: tuple[str, int], n: int, seed: int = 0) -> FuzzStats:
    """``n`` hostile messages over UDP, then ``n // 4`` over TCP (several per connection, some cut
    off); responses are read and counted, never waited for long."""
    stats = FuzzStats()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    port = udp.getsockname()[1]
    try:
        for i, data in enumerate(messages(seed, target, port, n)):
            with contextlib.suppress(OSError):  # a datagram too large for UDP: not sent
                udp.sendto(data, target)
                stats.sent_udp += 1
            if i % 20 == 19:
                await asyncio.sleep(0.05)  # let the server breathe (and its rate limit refill)
                stats.answers += _drain(udp)
        await asyncio.sleep(0.5)
        stats.answers += _drain(udp)
    finally:
        udp.close()
    rng = random.Random(seed + 1)
    batch = list(messages(seed + 1, target, port, n // 4))
    for start in range(0, len(batch), 5):
        try:
            reader, writer = await asyncio.open_connection(*target)
        except OSError:
            stats.tcp_dropped += 1
            continue
        try:
            for data in batch[start : start + 5]:
                cut = data[: rng.randrange(len(data))] if rng.random() < 0.15 else data
                writer.write(cut)
                stats.sent_tcp += 1
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                got = await asyncio.wait_for(reader.read(65536), 0.2)
                stats.answers += got.count(b"SIP/2.0 ")
        except (ConnectionError, OSError):
            stats.tcp_dropped += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    return stats


def _drain(sock: socket.socket) -> int:
    got = 0
    while True:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, OSError):
            return got
        got += data.startswith(b"SIP/2.0 ")
