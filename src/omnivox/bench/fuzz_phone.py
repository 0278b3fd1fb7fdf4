"""Fuzzing the phone edge: SIP datagrams to ``--sip-port``, and carrier media-stream frames
(``WS /telephony/{twilio,telnyx,plivo}/stream``), driven from outside as a trunk or a carrier would.

SIP: ``bench.sip_fuzz``'s seeded hostile requests, one datagram at a time (INVITEs with headers
dropped, doubled, swollen or garbled, lying lengths, SDP that offers nothing usable, other methods
on no dialog, random bytes). The outcome of a datagram is the first SIP status it got within a
short window (``sip:100``, ``sip:488``...) or ``silent``. Every INVITE answered 200 is ACKed and
hung up (BYE) at once, whenever its answer comes; one whose BYE ends nothing (its dialog headers
were mangled, yet taken) is hung up through the API before each check, and counted.

Carrier streams: one stream per ``--check-every`` frames: ``connected`` and ``start`` (sometimes
mutated, or left out), then media, marks, key presses, ``stop``s and hostile frames as in
``fuzz.labelled_frames``. A carrier gets no error replies (bad frames are counted and dropped), so
most outcomes are ``silent`` or the stream's own ``reply:media``/``reply:mark``; a close 1011 is a
fault.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import random
import secrets
import time
from collections.abc import Iterator

import httpx
import websockets

from omnivox.bench import sip_fuzz
from omnivox.bench.carrier_client import CarrierStream
from omnivox.bench.fuzz_frames import mutate, nested_json
from omnivox.bench.fuzz_outcomes import Outcomes
from omnivox.bench.fuzz_target import FuzzStats, Target, check_serving, reaction

CARRIERS = ("twilio", "telnyx", "plivo")
SIP_REACTION_S = 0.15
MAX_DATAGRAM = 65_507


# ---- SIP


def sip_datagrams(sip_port: int, local_port: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """Seeded hostile SIP (``bench.sip_fuzz``'s INVITEs and other requests), each with its kind."""
    rng = random.Random(seed)
    target = ("127.0.0.1", sip_port)
    for n in itertools.count():
        if rng.random() < 0.7:
            yield "invite", sip_fuzz.invite(rng, target, local_port, n)
        else:
            yield "other", sip_fuzz.other(rng, target, local_port, n)


class SipProbe(asyncio.DatagramProtocol):
    """A UDP endpoint that reads every SIP answer: the first status per datagram, and it hangs up
    (ACK, then BYE) every call answered 200."""

    def __init__(self, sip: tuple[str, int]) -> None:
        self.sip = sip
        self.transport: asyncio.DatagramTransport | None = None
        self.waiting: asyncio.Future[str] | None = None
        self.answered = 0  # calls answered 200 (each hung up)
        self.hung_up: set[str] = set()
        # answered calls whose BYE ended nothing (an INVITE whose dialog headers were mangled
        # but taken): hung up through the API before each check, counted
        self.leftover = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        text = data.decode("utf-8", "replace")
        head, _, _ = text.partition("\r\n\r\n")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("SIP/"):
            return  # a request (a BYE from the gateway's side): nothing to answer here
        status = parts[1]
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(f"sip:{status}")
        fields = _fields(lines[1:])
        if status == "200" and fields.get("cseq", "").endswith("INVITE"):
            call_id = fields.get("call-id", "")
            if call_id not in self.hung_up:
                self.hung_up.add(call_id)
                self.answered += 1
                self._end(fields)

    def _end(self, fields: dict[str, str]) -> None:
        assert self.transport is not None
        number = fields.get("cseq", "1").split()[0]
        local = self.transport.get_extra_info("sockname")[1]
        bye = int(number) + 1 if number.isdigit() else 2
        for cseq, method in ((f"{number} ACK", "ACK"), (f"{bye} BYE", "BYE")):
            message = (
                f"{method} sip:agent@{self.sip[0]}:{self.sip[1]} SIP/2.0\r\n"
                f"Via: SIP/2.0/UDP 127.0.0.1:{local};branch=z9hG4bK{secrets.token_hex(6)}\r\n"
                "Max-Forwards: 70\r\n"
                f"From: {fields.get('from', '')}\r\nTo: {fields.get('to', '')}\r\n"
                f"Call-ID: {fields.get('call-id', '')}\r\nCSeq: {cseq}\r\nContent-Length: 0\r\n\r\n"
            )
            self.transport.sendto(message.encode("utf-8", "surrogatepass"), self.sip)

    async def send(self, data: bytes) -> str:
        assert self.transport is not None
        if len(data) > MAX_DATAGRAM:
            return "not sent (larger than a datagram)"
        self.waiting = asyncio.get_running_loop().create_future()
        self.transport.sendto(data, self.sip)
        try:
            return await asyncio.wait_for(self.waiting, SIP_REACTION_S)
        except TimeoutError:
            return "silent"


def _fields(lines: list[str]) -> dict[str, str]:
    compact = {"i": "call-id", "f": "from", "t": "to", "v": "via"}
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            fields.setdefault(compact.get(key, key), value.strip())
    return fields


async def fuzz_sip(
    target: Target, sip_port: int, n: int, seed: int, every: int, outcomes: Outcomes
) -> FuzzStats:
    stats = FuzzStats()
    began = time.monotonic()
    loop = asyncio.get_running_loop()
    transport, probe = await loop.create_datagram_endpoint(
        lambda: SipProbe(("127.0.0.1", sip_port)), local_addr=("127.0.0.1", 0)
    )
    try:
        local_port = transport.get_extra_info("sockname")[1]
        source = sip_datagrams(sip_port, local_port, seed)
        while stats.frames < n:
            kind, data = next(source)
            outcome = await probe.send(data)
            stats.frames += 1
            stats.errors += outcome not in ("sip:100", "sip:180", "sip:200", "silent")
            outcomes.add("sip", stats.frames, kind, outcome)
            if stats.frames % every == 0 or stats.frames == n:
                await asyncio.sleep(0.5)  # late answers: their calls are hung up before the check
                probe.leftover += await hang_up_calls(target)
                await check_serving(target, "realtime", stats)
    finally:
        transport.close()
    outcomes.add("sip", 0, "answered_calls", f"answered:{probe.answered}")
    outcomes.add("sip", 0, "calls_left_after_bye", f"hung_up_by_api:{probe.leftover}")
    stats.seconds = time.monotonic() - began
    return stats


async def hang_up_calls(target: Target) -> int:
    """Hang up every call the gateway still holds (``POST .../calls/{id}/hangup``); how many."""
    async with httpx.AsyncClient(base_url=target.http, timeout=10) as client:
        sessions = (await client.get("/api/sessions", headers=target.admin())).json()["sessions"]
        calls = [s["session_id"] for s in sessions if str(s.get("session_id", "")).startswith("rtc_")]
        for call_id in calls:
            await client.post(f"/v1/realtime/calls/{call_id}/hangup", headers=target.client())
    return len(calls)


# ---- carrier streams


def _key(carrier: str) -> str:
    return {"twilio": "streamSid", "telnyx": "stream_id", "plivo": "streamId"}[carrier]


def carrier_frames(stream: CarrierStream, seed: int) -> Iterator[tuple[str, str | bytes]]:
    """Seeded frames of one carrier's stream, after its ``start``."""
    rng = random.Random(f"{stream.carrier}-{seed}")
    key = _key(stream.carrier)
    while True:
        roll = rng.random()
        media = stream._media(rng.randbytes(160))
        mark = {"event": "mark", key: stream.stream_id, "mark": {"name": f"m{rng.randint(0, 50)}"}}
        dtmf = {"event": "dtmf", key: stream.stream_id, "dtmf": {"digit": rng.choice("0123456789*#AX")}}
        if roll < 0.35:
            yield "valid_media", json.dumps(media)
        elif roll < 0.42:
            yield "valid_mark", json.dumps(mark)
        elif roll < 0.47:
            yield "valid_dtmf", json.dumps(dtmf)
        elif roll < 0.72:
            base = rng.choice([media, mark, dtmf])
            mutated = mutate({"type": "-", **base}, rng)
            mutated.pop("type", None)
            yield "mutated", json.dumps(mutated)
        elif roll < 0.78:
            payload = rng.choice(
                ["%%%", "", base64.b64encode(rng.randbytes(rng.randint(1000, 100_000))).decode()]
            )
            yield "odd_payload", json.dumps({**media, "media": {**media["media"], "payload": payload}})
        elif roll < 0.84:
            yield "binary", rng.randbytes(rng.randint(0, 2000))
        elif roll < 0.9:
            text = json.dumps(media)
            yield "truncated", text[: rng.randint(0, len(text) - 1)]
        elif roll < 0.94:
            yield "nested", nested_json(rng.choice([70, 3000]))
        elif roll < 0.97:
            yield "scalar", rng.choice(["[]", "null", "42", "{}", '{"event": 5}', '{"event": "stop"}'])
        else:
            yield "oversized", json.dumps({"event": "media", "pad": "y" * rng.randint(10_000, 300_000)})


def _start(stream: CarrierStream, rng: random.Random) -> tuple[str, list[str]]:
    """What opens a stream: its kind and frames (connected and start, or odd ones)."""
    connected = [] if stream.carrier == "plivo" else [json.dumps({"event": "connected", "protocol": "Call"})]
    start = stream._start({"From": "+15550001111", "To": "+15550002222"})
    roll = rng.random()
    if roll < 0.6:
        return "start", [*connected, json.dumps(start)]
    if roll < 0.85:
        return "start_mutated", [*connected, json.dumps(mutate({"type": "-", **start}, rng))]
    return "no_start", [*connected, json.dumps(stream._media(b"\xff" * 160))]


async def fuzz_carrier(
    target: Target, carrier: str, n: int, seed: int, every: int, outcomes: Outcomes
) -> FuzzStats:
    stats = FuzzStats()
    began = time.monotonic()
    rng = random.Random(f"{carrier}-streams-{seed}")
    url = target.ws + f"/telephony/{carrier}/stream"
    stream_no = 0
    while stats.frames < n:
        stream_no += 1
        stream = CarrierStream(carrier)
        kind, opening = _start(stream, rng)
        source = carrier_frames(stream, seed * 1000 + stream_no)
        batch_end = min(n, stats.frames + every)
        try:
            async with websockets.connect(url, additional_headers=target.client(), max_size=2**22) as ws:
                for greeting in opening:
                    await ws.send(greeting)
                outcomes.add(carrier, -stream_no, kind, await reaction(ws, 0.3))
                while stats.frames < batch_end:
                    frame_kind, frame = next(source)
                    await ws.send(frame)
                    outcome = await reaction(ws)
                    stats.frames += 1
                    outcomes.add(carrier, stats.frames, frame_kind, outcome)
                    if outcome.startswith("closed:"):
                        break
                with contextlib.suppress(websockets.exceptions.WebSocketException):
                    await ws.send(json.dumps({"event": "stop", _key(carrier): stream.stream_id, "stop": {}}))
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            # the stream carried the key it needs: a refusal is a failure (and moves the count on)
            outcomes.add(carrier, -stream_no, "refused", f"refused:{type(exc).__name__}")
            stats.failed_checks.append(f"{carrier} stream refused: {exc}")
            stats.reconnects += 1
            stats.frames = max(stats.frames, batch_end)
        if target.client_key is not None:
            await _unauthorized_stream(url, carrier, outcomes)
        if stats.frames >= batch_end:
            await check_serving(target, "realtime", stats)
    stats.seconds = time.monotonic() - began
    return stats


async def _unauthorized_stream(url: str, carrier: str, outcomes: Outcomes) -> None:
    """On a keyed server: a stream with no key and one with a wrong key (each must be refused)."""
    for kind, headers in (("no_key", {}), ("wrong_key", {"Authorization": "Bearer not-the-key"})):
        try:
            async with websockets.connect(url, additional_headers=headers, open_timeout=5) as ws:
                outcome = await reaction(ws, 1.0)
        except websockets.exceptions.InvalidStatus as exc:
            outcome = f"refused:{exc.response.status_code}"
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            outcome = f"refused:{type(exc).__name__}"
        outcomes.add(carrier, 0, kind, outcome)


async def fuzz_phone(
    target: Target, surface: str, n: int, seed: int, every: int, outcomes: Outcomes
) -> FuzzStats:
    if surface == "sip":
        assert target.sip_port is not None, "the fuzzed gateway listens for SIP (OMNIVOX_SIP_PORT)"
        return await fuzz_sip(target, target.sip_port, n, seed, every, outcomes)
    return await fuzz_carrier(target, surface, n, seed, every, outcomes)
