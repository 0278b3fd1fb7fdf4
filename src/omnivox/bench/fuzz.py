"""Fuzzing every wire protocol: seeded hostile frames, then proof that the server still serves.

For each protocol (streaming, duplex, realtime) a client opens a session and sends N frames drawn
from a seeded generator: valid messages with fields mutated (wrong types, out of range, huge
numbers), unknown types, malformed or truncated JSON, binary frames, deep nesting, lone UTF-16
surrogates, oversized strings, random bytes as base64 audio and images. After every ``--check-every``
frames it checks that the server still serves: a fresh session of that protocol gets its normal
answer, and no worker was marked OFFLINE or left stuck busy. Connections the server closes (a frame
it must refuse with close 1008, for instance) are reopened.

``omnivox bench fuzz --frames 10000`` prints, per protocol: frames sent, errors answered, reconnects,
worker losses and stuck workers (both must be 0), frames per second.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import websockets

from omnivox.bench.table import print_table, write_json
from omnivox.testing.cluster import cluster

PROTOCOLS = ("streaming", "duplex", "realtime")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--frames", type=int, default=2000, help="frames per protocol")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=int, default=100, help="check the server serves this often")
    parser.add_argument("--protocols", nargs="+", default=list(PROTOCOLS))
    parser.add_argument("--log-dir", help="keep the server logs here")


# ---- the frames


def random_b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def random_pcm_b64(rng: random.Random, samples: int, dtype: str) -> str:
    audio = np.asarray([rng.uniform(-0.5, 0.5) for _ in range(samples)], dtype=np.float32)
    data = audio.astype("<f4").tobytes() if dtype == "f4" else (audio * 32767).astype("<i2").tobytes()
    return base64.b64encode(data).decode()


def valid_messages(protocol: str, rng: random.Random) -> list[dict[str, Any]]:
    """Well-formed messages of ``protocol`` the fuzzer starts from (then mutates)."""
    if protocol == "streaming":
        return [
            {"type": "prefill", "messages": [{"role": "user", "content": "hello"}]},
            {"type": "generate", "max_new_tokens": 8},
            {"type": "stop"},
            {
                "type": "prefill",
                "messages": [{"role": "user", "content": [{"type": "audio", "data": random_b64(rng, 64)}]}],
            },
        ]
    if protocol == "duplex":
        return [
            {"type": "prepare", "system_prompt": "hi", "config": {"chunk_ms": 1000}},
            {"type": "audio_chunk", "audio_base64": random_pcm_b64(rng, 1600, "f4")},
            {"type": "audio_chunk", "audio_base64": random_pcm_b64(rng, 1600, "i2"), "format": "pcm16"},
            {
                "type": "audio_chunk",
                "audio_base64": random_pcm_b64(rng, 160, "f4"),
                "frame_base64_list": [random_b64(rng, 32)],
            },
            {"type": "pause", "timeout": 30},
            {"type": "resume"},
            {"type": "client_diagnostic", "metrics": {"x": 1}},
        ]
    return [
        {"type": "session.update", "session": {"type": "realtime", "instructions": "be brief"}},
        {"type": "input_audio_buffer.append", "audio": random_pcm_b64(rng, 240, "i2")},
        {"type": "input_audio_buffer.clear"},
        {"type": "input_audio_buffer.commit"},
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": []}},
        {"type": "response.cancel"},
        {"type": "conversation.item.delete", "item_id": "nope"},
    ]


ODD_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: None,
    lambda r: r.randint(-(10**12), 10**12),
    lambda r: int("9" * r.randint(20, 400)),
    lambda r: r.random() * 1e308,
    lambda r: "x" * r.randint(0, 5000),
    lambda r: "\ud800",
    lambda r: [],
    lambda r: {"nested": {"deeper": [1, 2, {"a": None}]}},
    lambda r: True,
    lambda r: random_b64(r, r.randint(0, 300)),
    lambda r: "%%%not base64%%%",
    lambda r: r.choice(["omni", "audio", "", "type", "../../etc/passwd"]),
]


def mutate(msg: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    msg = json.loads(json.dumps(msg))
    keys = [k for k in msg if k != "type"] or ["extra"]
    for _ in range(rng.randint(1, 3)):
        target = msg
        key = rng.choice(keys)
        if isinstance(target.get(key), dict) and target[key] and rng.random() < 0.5:
            target = target[key]
            key = rng.choice(list(target))
        target[key] = rng.choice(ODD_VALUES)(rng)
    return msg


def nested_json(depth: int) -> str:
    return '{"type": "x", "v": ' + "[" * depth + "]" * depth + "}"


def frames(protocol: str, seed: int) -> Iterator[str | bytes]:
    """An endless seeded stream of hostile (and some valid) frames for ``protocol``."""
    rng = random.Random(f"{protocol}-{seed}")
    valid = valid_messages(protocol, rng)
    while True:
        roll = rng.random()
        if roll < 0.25:
            yield json.dumps(rng.choice(valid))
        elif roll < 0.55:
            yield json.dumps(mutate(rng.choice(valid), rng))
        elif roll < 0.62:
            yield json.dumps({"type": rng.choice(["", "fly", "prefill.x", "session.delete", "__proto__"])})
        elif roll < 0.70:
            text = json.dumps(rng.choice(valid))
            yield text[: rng.randint(0, len(text) - 1)]  # truncated
        elif roll < 0.76:
            yield rng.randbytes(rng.randint(0, 2000))  # a binary frame
        elif roll < 0.82:
            yield nested_json(rng.choice([10, 70, 500, 3000]))
        elif roll < 0.88:
            msg = rng.choice(valid)
            yield json.dumps({**msg, "type": msg["type"], "event_id": "\ud800" * rng.randint(1, 3)})
        elif roll < 0.94:
            yield rng.choice(["[]", "null", "42", '"str"', "{}", '{"type": 5}', '{"type": null}'])
        else:
            yield json.dumps({"type": rng.choice(valid)["type"], "pad": "y" * rng.randint(10_000, 200_000)})


# ---- running it


@dataclass
class FuzzStats:
    frames: int = 0
    errors: int = 0  # error messages the server answered with
    reconnects: int = 0  # connections the server closed (then reopened)
    checks: int = 0
    failed_checks: list[str] = field(default_factory=list)
    worker_losses: int = 0
    stuck_workers: int = 0
    seconds: float = 0.0


def session_path(protocol: str, n: int) -> str:
    if protocol == "streaming":
        return f"/ws/streaming/fuzz-{n}"
    if protocol == "duplex":
        return f"/ws/duplex/fuzz-{n}"
    return "/v1/realtime"


async def _probe(base_ws: str, protocol: str) -> str | None:
    """One normal exchange of ``protocol``; None if it went as it should, else what went wrong."""
    try:
        async with websockets.connect(base_ws + session_path(protocol, 0), open_timeout=10) as ws:
            if protocol == "streaming":
                await ws.send(
                    json.dumps({"type": "prefill", "messages": [{"role": "user", "content": "hi"}]})
                )
                want = "prefill_done"
            elif protocol == "duplex":
                await ws.send(json.dumps({"type": "prepare"}))
                want = "prepared"
            else:
                want = "session.created"
            async with asyncio.timeout(20):
                while True:
                    msg = json.loads(await ws.recv())
                    if msg.get("type") == want:
                        return None
                    if msg.get("type") == "error":
                        return (
                            f"{protocol} probe: error {msg.get('code') or msg.get('error', {}).get('code')}"
                        )
    except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as exc:
        return f"{protocol} probe: {type(exc).__name__}: {exc}"


async def _drain(ws: Any, stats: FuzzStats) -> None:
    try:
        async for raw in ws:
            if isinstance(raw, str) and '"error"' in raw:
                stats.errors += 1
    except websockets.exceptions.WebSocketException:
        pass


async def fuzz_protocol(base_ws: str, http: str, protocol: str, n: int, seed: int, every: int) -> FuzzStats:
    """``n`` frames in batches of ``every``, each batch on its own connection (reopened when the
    server closes it), and a check after each batch (with the batch's connection closed, so a
    session-scoped fuzz connection does not hold the worker the check needs)."""
    stats = FuzzStats()
    began = time.monotonic()
    source = frames(protocol, seed)
    conn_no = 0
    while stats.frames < n:
        batch_end = min(n, stats.frames + every)
        while stats.frames < batch_end:
            conn_no += 1
            try:
                async with websockets.connect(base_ws + session_path(protocol, conn_no), max_size=None) as ws:
                    reader = asyncio.create_task(_drain(ws, stats))
                    try:
                        while stats.frames < batch_end and not reader.done():
                            await ws.send(next(source))
                            stats.frames += 1
                        await asyncio.sleep(0.05)  # let the last answers come
                    finally:
                        reader.cancel()
            except (OSError, websockets.exceptions.WebSocketException):
                stats.reconnects += 1
                continue
            if stats.frames < batch_end:
                stats.reconnects += 1  # the server closed it: reopen
        await _check(base_ws, http, protocol, stats)
    stats.seconds = time.monotonic() - began
    return stats


async def _check(base_ws: str, http: str, protocol: str, stats: FuzzStats) -> None:
    stats.checks += 1
    problem = await _probe(base_ws, protocol)
    if problem:
        stats.failed_checks.append(problem)
    async with httpx.AsyncClient(timeout=5) as client:
        workers = (await client.get(http + "/api/workers")).json()["workers"]
    stats.worker_losses = sum(1 for w in workers if w["state"] in ("OFFLINE", "ERROR"))
    # a worker busy for longer than any fuzz frame could hold it is stuck
    stats.stuck_workers = sum(1 for w in workers if (w.get("busy_for_s") or 0) > 60)


def run(args: argparse.Namespace) -> int:
    results: dict[str, dict[str, Any]] = {}
    env = {"OMNIVOX_LLM": "echo", "OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0", "OMNIVOX_CLIENT_CONNECT_RATE": "0"}
    with cluster(workers=1, engine="cascade", env=env) as c:
        for protocol in args.protocols:
            stats = asyncio.run(
                fuzz_protocol(c.ws, c.url, protocol, args.frames, args.seed, args.check_every)
            )
            results[protocol] = stats.__dict__
    rows = [
        [
            p,
            r["frames"],
            r["errors"],
            r["reconnects"],
            r["checks"],
            len(r["failed_checks"]),
            r["worker_losses"],
            r["stuck_workers"],
            r["frames"] / r["seconds"] if r["seconds"] else 0.0,
        ]
        for p, r in results.items()
    ]
    print_table(
        f"Fuzzed frames per protocol (seed {args.seed}), cascade worker, a check every {args.check_every}",
        [
            "protocol",
            "frames",
            "errors",
            "reconnects",
            "checks",
            "failed checks",
            "worker losses",
            "stuck",
            "frames/s",
        ],
        rows,
    )
    for p, r in results.items():
        for problem in r["failed_checks"][:5]:
            print(f"  {p}: {problem}")
    write_json(args.json, {"fuzz": results, "seed": args.seed})
    bad = any(r["failed_checks"] or r["worker_losses"] or r["stuck_workers"] for r in results.values())
    return 1 if bad else 0
