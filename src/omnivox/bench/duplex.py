"""Full duplex under load: N callers on ``/ws/duplex`` at once, each a live microphone.

Each caller prepares a session and sends one ``audio_chunk`` per ``--chunk-ms`` of audio, paced in
real time (``--speed`` > 1 only for tests): a sentence synthesised by hibari, then silence until the
model has spoken and ended its turn (or ``--wait-units`` have passed), ``--turns`` times. From the
results it times:

- unit wall-clock (the chunk arriving at the worker -> the result sent), for listen units and for
  speak units: it must stay well under the unit (MiniCPM-o's demo needs 400-900 ms of its 1000 ms
  unit on a GPU);
- lagging units (the loop fell behind and merged chunks);
- speech end -> first speak unit: from the moment the chunk holding the sentence's last sample was
  sent to the arrival of the first result that speaks (unit quantisation included: a reply can
  only start at a unit boundary).

Each engine runs with deferred finalize on and off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import websockets

from omnivox.audio.pcm import float32_to_b64
from omnivox.bench.record_flag import add_record_argument, cpu_seconds, record_env, recorded, wait_finished
from omnivox.bench.table import percentile, print_table, write_json
from omnivox.testing.cluster import cluster

RATE = 16000
SENTENCES = (
    "what is the weather like in paris today",
    "please remind me to call my sister tomorrow",
    "how long does it take to boil an egg",
)
PRODUCTION_INTERVALS = {"OMNIVOX_HEALTH_INTERVAL_S": "2", "OMNIVOX_HEARTBEAT_INTERVAL_S": "2"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", nargs="+", default=["cascade", "tiny"], help="engines to measure")
    parser.add_argument("--users", type=int, nargs="+", default=[1, 4], help="concurrent callers")
    parser.add_argument("--turns", type=int, default=3, help="sentences per caller")
    parser.add_argument("--chunk-ms", type=int, default=1000, help="audio per unit")
    parser.add_argument("--wait-units", type=int, default=8, help="silent units to wait for a reply")
    parser.add_argument("--finalize", nargs="+", default=["deferred", "inline"], help="deferred, inline")
    parser.add_argument("--speed", type=float, default=1.0, help="send faster than real time (tests)")
    parser.add_argument("--llm", default="echo", help="the cascade's LLM (echo, local, ...)")
    parser.add_argument("--log-dir", help="keep the server logs here")
    add_record_argument(parser)


@dataclass
class DuplexCallerStats:
    listen_ms: list[float] = field(default_factory=list)
    speak_ms: list[float] = field(default_factory=list)
    lagging: int = 0
    units: int = 0
    first_speak_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, result: dict[str, Any]) -> None:
        self.units += 1
        (self.listen_ms if result["is_listen"] else self.speak_ms).append(result["wall_clock_ms"])
        self.lagging += bool(result.get("lagging"))


def sentences() -> list[np.ndarray]:
    from omnivox.audio.resample import resample
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=1)
    return [resample(np.concatenate([c.audio for c in tts.synthesize(s)]), 24000, RATE) for s in SENTENCES]


class DuplexCaller:
    def __init__(self, url: str, clips: list[np.ndarray], args: argparse.Namespace, deferred: bool) -> None:
        self.url = url
        self.clips = clips
        self.args = args
        self.deferred = deferred
        self.stats = DuplexCallerStats()
        self.step = RATE * args.chunk_ms // 1000

    async def run(self, offset_s: float) -> DuplexCallerStats:
        await asyncio.sleep(offset_s)
        try:
            async with websockets.connect(self.url, max_size=None, ping_interval=None) as ws:
                await self._until(ws, "queue_done")
                config = {"chunk_ms": self.args.chunk_ms}
                await ws.send(
                    json.dumps({"type": "prepare", "config": config, "deferred_finalize": self.deferred})
                )
                await self._until(ws, "prepared")
                await self._talk(ws)
                await ws.send(json.dumps({"type": "stop"}))
                await self._until(ws, "stopped")
        except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as exc:
            self.stats.errors.append(f"connection: {type(exc).__name__}")
        return self.stats

    async def _until(self, ws: Any, kind: str) -> dict[str, Any]:
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if msg["type"] == kind:
                return msg
            if msg["type"] == "error":
                self.stats.errors.append(msg.get("code", "error"))

    async def _talk(self, ws: Any) -> None:
        start = time.monotonic()
        sent = 0
        pending: list[float] = []  # when each unit's chunk left

        async def unit(chunk: np.ndarray) -> dict[str, Any]:
            nonlocal sent
            sent += len(chunk)
            due = start + sent / RATE / self.args.speed  # a chunk leaves once it has been "recorded"
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await ws.send(json.dumps({"type": "audio_chunk", "audio_base64": float32_to_b64(chunk)}))
            pending.append(time.monotonic())
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if msg["type"] == "result":
                    self.stats.add(msg)
                    return msg
                if msg["type"] == "error":
                    self.stats.errors.append(msg.get("code", "error"))
                    return {"is_listen": True, "end_of_turn": False}

        silence = np.zeros(self.step, np.float32)
        for turn in range(self.args.turns):
            clip = self.clips[turn % len(self.clips)]
            n = -(-len(clip) // self.step) * self.step
            padded = np.zeros(n, np.float32)
            padded[: len(clip)] = clip
            for i in range(0, n, self.step):
                await unit(padded[i : i + self.step])
            speech_end = time.monotonic()  # the chunk with the last speech sample has just left
            spoke = False
            for _ in range(self.args.wait_units):
                result = await unit(silence)
                if not result["is_listen"] and not spoke:
                    spoke = True
                    self.stats.first_speak_s.append(time.monotonic() - speech_end)
                if spoke and result.get("end_of_turn"):
                    break


async def _load(
    url: str, users: int, clips: list[np.ndarray], args: argparse.Namespace, deferred: bool
) -> list[DuplexCallerStats]:
    callers = [DuplexCaller(url, clips, args, deferred) for _ in range(users)]
    spread = args.chunk_ms / 1000 / args.speed
    return await asyncio.gather(*(c.run(spread * i / users) for i, c in enumerate(callers)))


def summarize(stats: list[DuplexCallerStats]) -> dict[str, Any]:
    listen = [v for s in stats for v in s.listen_ms]
    speak = [v for s in stats for v in s.speak_ms]
    first = [v for s in stats for v in s.first_speak_s]
    return {
        "units": sum(s.units for s in stats),
        "listen_p50_ms": percentile(listen, 50),
        "listen_p95_ms": percentile(listen, 95),
        "speak_p50_ms": percentile(speak, 50),
        "speak_p95_ms": percentile(speak, 95),
        "speak_units": len(speak),
        "lagging": sum(s.lagging for s in stats),
        "first_speak_p50_ms": percentile(first, 50) * 1000,
        "first_speak_p95_ms": percentile(first, 95) * 1000,
        "replies": len(first),
        "errors": [e for s in stats for e in s.errors],
    }


COLUMNS = [
    "engine",
    "callers",
    "finalize",
    "record",
    "units",
    "listen p50 ms",
    "listen p95 ms",
    "speak units",
    "speak p50 ms",
    "speak p95 ms",
    "lagging",
    "speech end->speak p50 ms",
    "p95 ms",
    "errors",
    "gateway CPU %",
    "rec MB/min",
]


def row(engine: str, users: int, finalize: str, r: dict[str, Any], record: str = "off") -> list[Any]:
    rec = r.get("recorded")
    return [
        engine,
        users,
        finalize,
        record,
        r["units"],
        r["listen_p50_ms"],
        r["listen_p95_ms"],
        r["speak_units"],
        r["speak_p50_ms"],
        r["speak_p95_ms"],
        r["lagging"],
        r["first_speak_p50_ms"],
        r["first_speak_p95_ms"],
        len(r["errors"]),
        r.get("gateway_cpu_pct", float("nan")),
        rec["mb_per_min"] if rec else "-",
    ]


def run(args: argparse.Namespace) -> int:
    clips = sentences()
    rows, results = [], {}
    with tempfile.TemporaryDirectory(prefix="omnivox-bench-") as scratch:
        for record in args.record:
            for engine in args.engines:
                for users in args.users:
                    for finalize in args.finalize:
                        data_dir = Path(scratch) / f"{record}-{engine}-n{users}-{finalize}"
                        r = _one(engine, users, finalize, clips, args, record_env(record, data_dir))
                        r["recorded"] = recorded(data_dir) if record == "on" else None
                        key = f"{engine}/n{users}/{finalize}" + ("/record" if record == "on" else "")
                        results[key] = r
                        rows.append(row(engine, users, finalize, r, record))
    print_table(
        f"Duplex units, {args.turns} sentences per caller, {args.chunk_ms} ms units"
        + (f", {args.speed}x real time" if args.speed != 1 else ", real time")
        + f", cascade LLM {args.llm}",
        COLUMNS,
        rows,
    )
    write_json(args.json, {"duplex": results, "chunk_ms": args.chunk_ms, "turns": args.turns})
    return 0


def _one(
    engine: str,
    users: int,
    finalize: str,
    clips: list[np.ndarray],
    args: argparse.Namespace,
    extra: dict[str, str],
) -> dict[str, Any]:
    """One cluster per setting: a recording run's files are its own, and are all written when the
    gateway stops."""
    env = {**PRODUCTION_INTERVALS, "OMNIVOX_LLM": args.llm, **extra}
    log_dir = Path(args.log_dir) / f"{engine}-n{users}-{finalize}" if args.log_dir else None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    with cluster(workers=users, engine=engine, log_dir=log_dir, **env) as c:
        assert c.gateway is not None
        began, cpu0 = time.monotonic(), cpu_seconds(c.gateway.pid)
        stats = asyncio.run(_load(f"{c.ws}/ws/duplex/bench", users, clips, args, finalize == "deferred"))
        wall = time.monotonic() - began
        wait_finished(Path(extra["OMNIVOX_DATA_DIR"]))
        gateway_cpu = cpu_seconds(c.gateway.pid) - cpu0  # the recorder's work included, replays too
    return {**summarize(stats), "gateway_cpu_pct": 100 * gateway_cpu / wall}
