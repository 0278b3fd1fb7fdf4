"""A long run at a steady pace: does anything grow?

``omnivox bench soak --minutes 60 --callers 8`` starts a gateway that records and one worker per
caller with the embedded models (Whisper, SmolLM2, hibari; ``--llm``/``--asr`` to change them), and
``--callers`` callers that call ``/v1/realtime`` over and over: each call speaks ``--turns``
sentences in real time (hibari speech, server VAD), each after the reply to the one before has
played, hangs up, rests ``--rest-s`` and calls again. Every turn's outcome is kept (``completed``,
``response failed``, ``error CODE``, ``timeout``, ``closed CODE``, ``connection lost``, ``could not
connect``, ``refused STATUS``).

Each minute it samples every process (the gateway, each worker): resident memory and open files.
It prints that table, then each process's growth per hour after the warm-up (``--warmup-minutes``:
models loaded, caches filled, the first recordings written): a least-squares slope of memory and
open files over the minutes after it. The aim: no process growing more than 20 MiB/h, no open files
growing at all, and 0 failed turns. At the end every worker must be IDLE and every recording
finished.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import websockets

from omnivox.audio.pcm import pcm16_to_b64
from omnivox.bench.realtime import PRODUCTION_INTERVALS, SENTENCES, speech_clip
from omnivox.bench.record_flag import recorded, wait_finished
from omnivox.bench.table import print_table, write_json
from omnivox.core.keys import bearer
from omnivox.protocol.realtime.events import ga_type
from omnivox.testing.cluster import cluster

RATE = 24000
CHUNK_MS = 40
REPLY_WITHIN_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=60.0, help="how long the callers call")
    parser.add_argument("--callers", type=int, default=8, help="callers at once (one worker each)")
    parser.add_argument("--turns", type=int, default=4, help="turns per call")
    parser.add_argument("--rest-s", type=float, default=5.0, help="a caller's pause between calls")
    parser.add_argument("--warmup-minutes", type=float, help="left out of the growth (default: a fifth)")
    parser.add_argument("--llm", default="local", help="local (default: the embedded SmolLM2), echo")
    parser.add_argument("--asr", default="whisper", help="whisper (default), pocketsphinx")
    parser.add_argument("--log-dir", help="keep the server logs here")


# ---- the callers


@dataclass
class Turns:
    """Every turn's outcome, and voice-to-voice latency of the answered ones."""

    outcomes: Counter[str] = field(default_factory=Counter)
    v2v_s: list[float] = field(default_factory=list)
    calls: int = 0

    @property
    def failed(self) -> int:
        return sum(n for outcome, n in self.outcomes.items() if outcome != "completed")


class SoakCaller:
    """Calls, speaks its turns in real time, hangs up, rests, calls again, until told to stop."""

    def __init__(
        self,
        url: str,
        name: str,
        clips: list[tuple[np.ndarray, float]],
        args: argparse.Namespace,
        key: str | None = None,
    ):
        self.url = url
        self.name = name
        self.clips = clips
        self.args = args
        self.headers = bearer(key)
        self.turns = Turns()

    async def run(self, until: float, offset_s: float) -> None:
        await asyncio.sleep(offset_s)
        n = 0
        while time.monotonic() < until:
            n += 1
            await self.call(f"{self.name}-{n}", until)
            await asyncio.sleep(self.args.rest_s)

    async def call(self, session_id: str, until: float) -> None:
        self.turns.calls += 1
        in_turn = False
        try:
            async with websockets.connect(
                f"{self.url}?session_id={session_id}",
                max_size=None,
                ping_interval=None,
                additional_headers=self.headers,
            ) as ws:
                vad = {"type": "server_vad", "silence_duration_ms": 500}
                session = {"type": "realtime", "audio": {"input": {"turn_detection": vad}}}
                await ws.send(json.dumps({"type": "session.update", "session": session}))
                mic = Microphone(ws)
                for turn in range(self.args.turns):
                    if time.monotonic() >= until and turn:
                        break
                    in_turn = True
                    outcome, v2v = await self.turn(ws, mic, self.clips[turn % len(self.clips)])
                    in_turn = False
                    self.turns.outcomes[outcome] += 1
                    if v2v is not None:
                        self.turns.v2v_s.append(v2v)
                    if outcome != "completed":
                        break
        except websockets.exceptions.InvalidStatus as exc:  # refused before it was a WebSocket
            self.turns.outcomes[f"refused {exc.response.status_code}"] += 1
        except websockets.exceptions.ConnectionClosed as exc:
            if in_turn or exc.rcvd is None or exc.rcvd.code not in (1000, 1001):
                # a close frame says why (its code); none at all: the connection was cut
                self.turns.outcomes[f"closed {exc.rcvd.code}" if exc.rcvd else "connection lost"] += 1
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            self.turns.outcomes[
                f"{'connection lost' if in_turn else 'could not connect'} ({type(exc).__name__})"
            ] += 1

    async def turn(
        self, ws: Any, mic: Microphone, clip: tuple[np.ndarray, float]
    ) -> tuple[str, float | None]:
        audio, speech_end = clip
        speech_end_at = mic.clock_after(speech_end)
        await mic.send(audio)
        deadline = time.monotonic() + REPLY_WITHIN_S
        first_audio: float | None = None
        played_s = 0.0
        while True:
            if time.monotonic() > deadline:
                return "timeout", None
            try:
                raw = await asyncio.wait_for(ws.recv(), CHUNK_MS / 1000)
            except TimeoutError:
                await mic.send(np.zeros(RATE * CHUNK_MS // 1000, np.float32))  # the microphone stays open
                continue
            event = json.loads(raw)
            kind = ga_type(event.get("type", ""))
            if kind == "response.output_audio.delta":
                if first_audio is None:
                    first_audio = time.monotonic()
                played_s += len(event["delta"]) * 3 / 4 / 2 / RATE
            elif kind == "error":
                return f"error {event['error'].get('code')}", None
            elif kind == "response.done":
                status = event["response"]["status"]
                if status != "completed":
                    return f"response {status}", None
                # the caller listens to the reply before saying the next sentence
                rest = (first_audio or time.monotonic()) + played_s - time.monotonic()
                await mic.send(np.zeros(int(RATE * max(0.5, rest + 0.5)), np.float32))
                return "completed", (first_audio - speech_end_at) if first_audio else None


class Microphone:
    """PCM16 appends paced in real time: a chunk leaves once it has been "recorded"."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.start = time.monotonic()
        self.sent = 0

    def clock_after(self, seconds: float) -> float:
        return self.start + self.sent / RATE + seconds

    async def send(self, audio: np.ndarray) -> None:
        step = RATE * CHUNK_MS // 1000
        for i in range(0, len(audio), step):
            chunk = audio[i : i + step]
            self.sent += len(chunk)
            await asyncio.sleep(max(0.0, self.start + self.sent / RATE - time.monotonic()))
            await self.ws.send(
                json.dumps({"type": "input_audio_buffer.append", "audio": pcm16_to_b64(chunk)})
            )


# ---- what the processes hold


@dataclass
class Sample:
    minute: float
    rss_mib: dict[str, float]
    open_files: dict[str, int]
    turns: int
    failed: int


def rss_mib(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def growth_per_hour(minutes: list[float], values: list[float]) -> float:
    """The least-squares slope of ``values`` over ``minutes``, per hour (NaN with under 2 points)."""
    if len(minutes) < 2 or len(set(minutes)) < 2:
        return float("nan")
    slope = np.polyfit(np.asarray(minutes, float), np.asarray(values, float), 1)[0]
    return float(slope * 60)


def growth(samples: list[Sample], warmup: float) -> dict[str, dict[str, float]]:
    """Per process: memory and open files after the warm-up, first and last, and growth per hour."""
    after = [s for s in samples if s.minute >= warmup] or samples[-2:]
    out: dict[str, dict[str, float]] = {}
    for name in samples[0].rss_mib:
        minutes = [s.minute for s in after]
        rss = [s.rss_mib[name] for s in after]
        fds = [float(s.open_files[name]) for s in after]
        out[name] = {
            "rss_first_mib": rss[0],
            "rss_last_mib": rss[-1],
            "rss_mib_per_h": growth_per_hour(minutes, rss),
            "files_first": fds[0],
            "files_last": fds[-1],
            "files_per_h": growth_per_hour(minutes, fds),
        }
    return out


# ---- running it


def run(args: argparse.Namespace) -> int:
    clips = [speech_clip(s) for s in SENTENCES]
    warmup = args.warmup_minutes if args.warmup_minutes is not None else args.minutes / 5
    env = {**PRODUCTION_INTERVALS, "OMNIVOX_LLM": args.llm, "OMNIVOX_ASR": args.asr}
    with tempfile.TemporaryDirectory(prefix="omnivox-soak-") as scratch:
        data_dir = Path(scratch) / "data"
        log_dir = Path(args.log_dir) if args.log_dir else Path(scratch) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env.update(
            OMNIVOX_RECORD_SESSIONS="true", OMNIVOX_DATA_DIR=str(data_dir), OMNIVOX_RECORD_MIN_FREE_MB="0"
        )
        began = time.time()
        with cluster(workers=args.callers, engine="cascade", log_dir=log_dir, **env) as c:
            assert c.gateway is not None
            pids = {"gateway": c.gateway.pid, **{f"worker{i}": w.pid for i, w in enumerate(c.workers)}}
            callers, samples = asyncio.run(_soak(c.ws + "/v1/realtime", pids, clips, args))
            workers = c.workers_view()
            idle = sum(1 for w in workers if w["state"] == "IDLE")
        wait_finished(data_dir)
        rec = recorded(data_dir)
        load = os.getloadavg()
    turns = Turns()
    for caller in callers:
        turns.outcomes.update(caller.turns.outcomes)
        turns.v2v_s.extend(caller.turns.v2v_s)
        turns.calls += caller.turns.calls
    grown = growth(samples, warmup)
    _print(args, samples, grown, turns, idle, rec, warmup, load)
    write_json(
        args.json,
        {
            "soak": {
                "minutes": args.minutes,
                "callers": args.callers,
                "started_at": began,
                "samples": [s.__dict__ for s in samples],
                "growth": grown,
                "turns": dict(turns.outcomes),
                "calls": turns.calls,
                "v2v_s": turns.v2v_s,
                "workers_idle_after": idle,
                "recorded": rec,
                "load_average": load,
            }
        },
    )
    bad_growth = any(g["rss_mib_per_h"] > 20 or g["files_per_h"] > 0.5 for g in grown.values())
    return (
        1 if turns.failed or idle != args.callers or rec["complete"] != rec["sessions"] or bad_growth else 0
    )


async def _soak(
    url: str, pids: dict[str, int], clips: list[tuple[np.ndarray, float]], args: argparse.Namespace
) -> tuple[list[SoakCaller], list[Sample]]:
    start = time.monotonic()
    until = start + args.minutes * 60
    callers = [SoakCaller(url, f"soak{i}-{secrets.token_hex(2)}", clips, args) for i in range(args.callers)]
    samples: list[Sample] = []

    def sample() -> None:
        done = sum(sum(c.turns.outcomes.values()) for c in callers)
        failed = sum(c.turns.failed for c in callers)
        samples.append(
            Sample(
                round((time.monotonic() - start) / 60, 2),
                {name: round(rss_mib(pid), 1) for name, pid in pids.items()},
                {name: open_files(pid) for name, pid in pids.items()},
                done,
                failed,
            )
        )

    async def sampler() -> None:
        while True:
            sample()
            await asyncio.sleep(60)

    every = asyncio.create_task(sampler())
    try:
        spread = 8.0 / max(1, args.callers)
        await asyncio.gather(*(c.run(until, i * spread) for i, c in enumerate(callers)))
    finally:
        every.cancel()
    await asyncio.sleep(3)  # the last sessions end and their recordings are written
    sample()
    return callers, samples


def _print(
    args: argparse.Namespace,
    samples: list[Sample],
    grown: dict[str, dict[str, float]],
    turns: Turns,
    idle: int,
    rec: dict[str, Any],
    warmup: float,
    load: tuple[float, float, float],
) -> None:
    names = list(samples[0].rss_mib)
    print_table(
        f"Soak: {args.callers} callers, {args.turns} turns a call, {args.llm} LLM, {args.asr} ASR, "
        "recording on (memory MiB / open files, each minute)",
        ["minute", *names, "turns", "failed"],
        [
            [s.minute, *(f"{s.rss_mib[n]:.0f} / {s.open_files[n]}" for n in names), s.turns, s.failed]
            for s in samples
        ],
    )
    print_table(
        f"Growth per hour after {warmup:g} minutes of warm-up",
        ["process", "MiB first", "MiB last", "MiB/h", "open files first", "last", "files/h"],
        [
            [
                name,
                g["rss_first_mib"],
                g["rss_last_mib"],
                g["rss_mib_per_h"],
                int(g["files_first"]),
                int(g["files_last"]),
                g["files_per_h"],
            ]
            for name, g in grown.items()
        ],
    )
    v2v = sorted(turns.v2v_s)
    p50 = v2v[len(v2v) // 2] * 1000 if v2v else float("nan")
    outcomes = ", ".join(f"{o} {n}" for o, n in turns.outcomes.most_common())
    print(f"  calls {turns.calls}, turns: {outcomes or 'none'}; voice-to-voice p50 {p50:.0f} ms")
    print(f"  after the run: {idle}/{args.callers} workers IDLE; recordings {rec}")
    print(f"  load average (1, 5, 15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
