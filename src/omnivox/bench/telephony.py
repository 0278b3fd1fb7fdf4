"""Phone calls under load: N concurrent calls, each asking spoken questions at 8 kHz, over SIP
(``sip_caller``: INVITE, PCMU RTP both ways in real time) and over Twilio Media Streams
(``carrier_client``), with the same N WebSocket callers of ``bench realtime`` beside them
(``--transport websocket``, PCM16 at 24 kHz) as the baseline.

Each caller speaks ``--turns`` sentences (hibari, resampled to 8 kHz G.711 on a call), each after
the previous reply has played, and a sideband (``/v1/realtime?call_id=``) watches each call's
session. Per turn, from the moment the question's last speech sample was captured:

- "v2v": to the reply's first audio at the caller's side of the gateway (SIP: the gateway starts
  pacing it out, ``output_audio_buffer.started``; Twilio: the first ``media`` message; WebSocket:
  the first audio delta);
- "heard": to the first reply sample that is not silence reaching the caller's ear (SIP: the RTP
  packet holding it arrived; Twilio: the carrier played it; WebSocket: played from the first delta
  in real time). It counts the quiet hibari puts before a sentence; it is the one to compare.

"WER" is the word error rate of the session's transcripts of the questions (the embedded ASR on
what the call carried: 8 kHz G.711 on a call, 24 kHz PCM on a WebSocket). "gateway CPU %/call" and
"worker CPU %/call" are the processes' CPU over the run / wall time / calls: for calls the gateway
holds the SIP signalling, RTP both ways (jitter buffer, 20 ms pacing) or the carrier's stream, and
the bridging to the worker. A run holds real time when every turn was answered, nothing failed,
and 95% of replies began within ``--silence-ms`` + 1 s of the question's end, as in ``bench
realtime``.

    omnivox bench telephony --calls 1 2 4 --turns 3 --transport sip twilio websocket
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

from omnivox.bench import realtime
from omnivox.bench.carrier_client import CarrierStream
from omnivox.bench.paced_caller import PAUSE_S, add_pacing_argument, pacing
from omnivox.bench.record_flag import cpu_seconds
from omnivox.bench.sip_caller import SipCaller
from omnivox.bench.table import percentile, print_table, write_json
from omnivox.testing.cluster import cluster, free_port
from omnivox.voice.asr.base import word_error_rate

RATE = 24000
TRANSPORTS = ("sip", "twilio", "websocket")
REPLY_WITHIN_S = 25.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 2, 4], help="concurrent calls")
    parser.add_argument("--turns", type=int, default=3, help="questions per call")
    parser.add_argument("--silence-ms", type=int, default=500, help="server VAD silence_duration_ms")
    parser.add_argument("--transport", nargs="+", default=list(TRANSPORTS), choices=TRANSPORTS)
    parser.add_argument("--llm", default="local", help="local (default: the embedded SmolLM2), echo")
    parser.add_argument("--asr", default="whisper", help="whisper (default), pocketsphinx")
    parser.add_argument("--log-dir", help="keep the server logs here")
    add_pacing_argument(parser)
    parser.add_argument(
        "--media-only",
        type=float,
        metavar="SECONDS",
        help="instead: N SIP calls with no worker (they wait in the queue), each sending and receiving "
        "RTP for SECONDS: the gateway's CPU per call for signalling and RTP alone",
    )


@dataclass
class CallStats:
    v2v_s: list[float] = field(default_factory=list)
    heard_s: list[float] = field(default_factory=list)
    wer: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Sideband:
    """The events of one call's session."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self.events.append((time.monotonic(), json.loads(raw)))
        except websockets.ConnectionClosed:
            pass

    def count(self, kind: str) -> int:
        return sum(1 for _, e in self.events if e.get("type") == kind)

    def first_after(self, kind: str, t: float) -> float | None:
        return next((at for at, e in self.events if at > t and e.get("type") == kind), None)

    def transcripts(self) -> list[str]:
        kind = "conversation.item.input_audio_transcription.completed"
        return [e.get("transcript", "") for _, e in self.events if e.get("type") == kind]

    async def close(self) -> None:
        await self.ws.close()
        self.task.cancel()


class PhoneCaller:
    """One call (SIP or a Twilio stream) asking the questions, with its sideband."""

    def __init__(
        self,
        transport: str,
        base: str,
        sip_port: int,
        clips: list,
        claim: asyncio.Lock,
        pause_s: float = PAUSE_S,
    ) -> None:
        self.transport = transport
        self.pause_s = pause_s  # before the next question once a reply has been played
        self.base = base
        self.sip_port = sip_port
        self.clips = clips
        self.claim = claim
        self.stats = CallStats()

    async def run(self, turns: int, offset_s: float, claimed: set[str]) -> CallStats:
        await asyncio.sleep(offset_s)
        phone: Any = None
        side: Sideband | None = None
        try:
            async with self.claim:  # one call connects at a time, so each finds its own session
                phone = await self._connect()
                side = await self._sideband(claimed)
            await self._talk(phone, side, turns)
        except Exception as exc:  # a bench reports what went wrong with one call and goes on
            self.stats.errors.append(f"{type(exc).__name__}: {exc}"[:120])
        finally:
            if phone is not None:
                await self._hang_up(phone)
            if side is not None:
                said = [realtime.SENTENCES[i % len(realtime.SENTENCES)] for i in range(turns)]
                self.stats.wer += [
                    word_error_rate(s, t) for s, t in zip(said, side.transcripts(), strict=False)
                ]
                await side.close()
        return self.stats

    async def _connect(self) -> Any:
        if self.transport == "sip":
            sip = SipCaller()
            status = await sip.dial(f"sip:agent@127.0.0.1:{self.sip_port}", ("127.0.0.1", self.sip_port))
            assert status == 200, f"the INVITE got {status}"
            return sip
        stream = CarrierStream("twilio")
        await stream.open(self.base.replace("http", "ws", 1) + "/telephony/twilio/stream")
        return stream

    async def _sideband(self, claimed: set[str]) -> Sideband:
        deadline = time.monotonic() + 10
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                sessions = (await http.get(self.base + "/api/sessions")).json()["sessions"]
                new = [s["session_id"] for s in sessions if s["session_id"].startswith("rtc")]
                new = [s for s in new if s not in claimed]
                if new:
                    claimed.add(new[0])
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("the call never became a session")
                await asyncio.sleep(0.05)
        url = self.base.replace("http", "ws", 1) + f"/v1/realtime?call_id={new[0]}"
        return Sideband(await websockets.connect(url, max_size=None))

    async def _talk(self, phone: Any, side: Sideband, turns: int) -> None:
        for turn in range(turns):
            clip, speech_end = self.clips[turn % len(self.clips)]
            done = side.count("output_audio_buffer.stopped")
            if self.transport == "sip":
                sent = await phone.speak(clip, RATE)
                ended = sent - len(clip) / RATE + speech_end  # the last speech sample's capture
            else:
                ended = await phone.speak(clip, RATE) + speech_end
            deadline = time.monotonic() + REPLY_WITHIN_S
            while side.count("output_audio_buffer.stopped") <= done:
                if time.monotonic() > deadline:
                    self.stats.errors.append(f"timeout: no reply within {REPLY_WITHIN_S:g} s")
                    return
                await asyncio.sleep(0.05)
            if self.transport == "sip":
                v2v = side.first_after("output_audio_buffer.started", ended)
            else:
                v2v = next((t for t in phone.media_at if t > ended), None)
            heard = phone.first_sound_after(ended)
            if v2v is not None:
                self.stats.v2v_s.append(v2v - ended)
            if heard is not None:
                self.stats.heard_s.append(heard - ended)
            await asyncio.sleep(self.pause_s)  # the caller's pause before the next question

    async def _hang_up(self, phone: Any) -> None:
        try:
            if self.transport == "sip":
                phone.hang_up()
                await asyncio.sleep(0.1)
            else:
                await phone.stop()
        finally:
            await phone.close()


def _env(args: argparse.Namespace, sip_port: int) -> dict[str, str]:
    vad = {"type": "server_vad", "silence_duration_ms": args.silence_ms}
    rtp = 40000 + (sip_port % 100) * 40
    return {
        **realtime.PRODUCTION_INTERVALS,
        "OMNIVOX_LLM": args.llm,
        "OMNIVOX_ASR": args.asr,
        "OMNIVOX_SIP_PORT": str(sip_port),
        "OMNIVOX_RTP_PORT_MIN": str(rtp),
        "OMNIVOX_RTP_PORT_MAX": str(rtp + 39),
        "OMNIVOX_RECORD_SESSIONS": "false",
        "OMNIVOX_PHONE_PROFILES": json.dumps({"default": {"turn_detection": vad, "end_call": False}}),
    }


async def _load(
    transport: str, base: str, sip_port: int, n: int, clips: list, args: argparse.Namespace
) -> list[CallStats]:
    offsets = [realtime.SPREAD_S * i / n for i in range(n)]
    if transport == "websocket":
        url = base.replace("http", "ws", 1) + "/v1/realtime"
        ws_args = argparse.Namespace(
            chunk_ms=40, mode="server_vad", silence_ms=args.silence_ms, pause_s=args.pause_s
        )
        callers = [realtime.RealtimeCaller(url, clips, ws_args) for _ in range(n)]
        found = await asyncio.gather(*(c.run(args.turns, o) for c, o in zip(callers, offsets, strict=True)))
        return [CallStats(s.v2v_s, s.heard_s, [], s.errors) for s in found]
    claim, claimed = asyncio.Lock(), set[str]()
    phones = [PhoneCaller(transport, base, sip_port, clips, claim, args.pause_s) for _ in range(n)]
    return list(
        await asyncio.gather(*(p.run(args.turns, o, claimed) for p, o in zip(phones, offsets, strict=True)))
    )


def _one(args: argparse.Namespace, transport: str, n: int, clips: list) -> dict[str, Any]:
    sip_port = free_port()
    log_dir = Path(args.log_dir) / f"{transport}-n{n}" if args.log_dir else None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    with cluster(workers=n, engine="cascade", log_dir=log_dir, env=_env(args, sip_port)) as c:
        assert c.gateway is not None
        pids = [w.pid for w in c.workers]
        began, gw0, wk0 = time.monotonic(), cpu_seconds(c.gateway.pid), sum(cpu_seconds(p) for p in pids)
        stats = asyncio.run(_load(transport, c.url, sip_port, n, clips, args))
        wall = time.monotonic() - began
        gateway_cpu = cpu_seconds(c.gateway.pid) - gw0
        worker_cpu = sum(cpu_seconds(p) for p in pids) - wk0
        rtf = realtime.real_time_factors(httpx.get(c.url + "/metrics", timeout=5).text)
    v2v = [s for st in stats for s in st.v2v_s]
    heard = [s for st in stats for s in st.heard_s]
    wer = [w for st in stats for w in st.wer]
    errors = [e for st in stats for e in st.errors]
    p95 = percentile(heard, 95)
    held = (
        len(heard) == n * args.turns
        and not errors
        and p95 < args.silence_ms / 1000 + realtime.HEADROOM_S + 0.3
    )
    return {
        "transport": transport,
        "calls": n,
        "turns": len(heard),
        "v2v_p50_ms": percentile(v2v, 50) * 1000,
        "v2v_p95_ms": percentile(v2v, 95) * 1000,
        "heard_p50_ms": percentile(heard, 50) * 1000,
        "heard_p95_ms": p95 * 1000,
        "wer": statistics.fmean(wer) if wer else float("nan"),
        "asr_rtf": rtf.get("asr", float("nan")),
        "gateway_cpu_pct": 100 * gateway_cpu / wall / n,
        "worker_cpu_pct": 100 * worker_cpu / wall / n,
        "errors": errors,
        "real_time": held,
    }


COLUMNS = [
    "transport",
    "calls",
    "turns",
    "v2v p50 ms",
    "v2v p95 ms",
    "heard p50 ms",
    "heard p95 ms",
    "WER",
    "ASR RTF",
    "gateway CPU %/call",
    "worker CPU %/call",
    "errors",
    "real time",
]


async def _hold_calls(sip_port: int, n: int, seconds: float) -> int:
    """``n`` SIP calls that send silence and receive the gateway's 20 ms packets for ``seconds``;
    the RTP packets received in all."""
    phones = [SipCaller() for _ in range(n)]
    try:
        for phone in phones:
            status = await phone.dial(f"sip:agent@127.0.0.1:{sip_port}", ("127.0.0.1", sip_port))
            assert status == 200, f"the INVITE got {status}"
        await asyncio.sleep(seconds)
        return sum(len(p.received) for p in phones)
    finally:
        for phone in phones:
            if phone.call is not None:
                phone.hang_up()
        await asyncio.sleep(0.2)
        for phone in phones:
            await phone.close()


def _media_only(args: argparse.Namespace) -> int:
    rows = []
    for n in args.calls:
        sip_port = free_port()
        # every call comes from 127.0.0.1: no per-source INVITE rate
        env = {
            **_env(args, sip_port),
            "OMNIVOX_SIP_MAX_CALLS": str(max(16, n)),
            "OMNIVOX_SIP_INVITE_RATE": "0",
        }
        with cluster(workers=0, env=env) as c:
            assert c.gateway is not None
            began, cpu0 = time.monotonic(), cpu_seconds(c.gateway.pid)
            packets = asyncio.run(_hold_calls(sip_port, n, args.media_only))
            wall = time.monotonic() - began
            cpu = cpu_seconds(c.gateway.pid) - cpu0
        rows.append([n, wall, packets / wall / n, 100 * cpu / wall / n, 100 * cpu / wall])
    print_table(
        f"SIP signalling and RTP alone: calls held {args.media_only:g} s, no session work",
        ["calls", "wall s", "RTP packets/s per call (in)", "gateway CPU %/call", "gateway CPU % all"],
        rows,
    )
    write_json(args.json, {"media_only": rows})
    return 0


def run(args: argparse.Namespace) -> int:
    if args.media_only:
        return _media_only(args)
    clips = [realtime.speech_clip(s) for s in realtime.SENTENCES]
    rows: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    for n in args.calls:
        for transport in args.transport:
            r = _one(args, transport, n, clips)
            results.append(r)
            rows.append(
                [
                    transport,
                    n,
                    r["turns"],
                    r["v2v_p50_ms"],
                    r["v2v_p95_ms"],
                    r["heard_p50_ms"],
                    r["heard_p95_ms"],
                    r["wer"] if transport != "websocket" else "-",
                    r["asr_rtf"],
                    r["gateway_cpu_pct"],
                    r["worker_cpu_pct"],
                    len(r["errors"]),
                    "yes" if r["real_time"] else "no",
                ]
            )
    print_table(
        f"Phone calls at 8 kHz vs WebSocket sessions, {args.turns} questions per call, {args.llm} LLM, "
        f"{args.asr} ASR (server_vad: silence_duration_ms={args.silence_ms}); {pacing(args.pause_s)}",
        COLUMNS,
        rows,
    )
    for r in results:
        if r["errors"]:
            common = statistics.multimode(r["errors"])
            print(f"  {r['transport']} x{r['calls']}: errors {common} ({len(r['errors'])} in all)")
    write_json(args.json, {"telephony": results, "turns_per_call": args.turns, "silence_ms": args.silence_ms})
    return 0
