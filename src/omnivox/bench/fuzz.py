"""Fuzzing every wire protocol and surface: seeded hostile frames, then proof that the server still serves.

For each WebSocket protocol (streaming, duplex, realtime) a client opens a session and sends N frames
drawn from a seeded generator: valid messages with fields mutated (wrong types, out of range, huge
numbers), unknown types, malformed or truncated JSON, binary frames, deep nesting, lone UTF-16
surrogates, oversized strings, random bytes as base64 audio and images. Each frame is sent once the
server reacted to the one before (or stayed silent ``REACTION_S``), and that reaction is its outcome
(``fuzz_outcomes``). The HTTP surfaces (``fuzz_http``: WebRTC offers, client secrets, the recordings
API, uploads) and the phone edge (``fuzz_phone``: SIP datagrams, Twilio/Telnyx/Plivo stream frames)
are fuzzed the same way. After every ``--check-every`` frames the server must still serve: a fresh
realtime (or the fuzzed protocol's) session gets its normal answer, and no worker was marked OFFLINE
or left stuck busy. Connections the server closes are reopened.

``omnivox bench fuzz --frames 2000`` runs it on an open server and on one with keys (``--keys``),
and prints per surface: frames, server faults (HTTP 500, close 1011 or 1006), failed checks, lost
and stuck workers, the commonest outcomes, then the tracebacks and ERROR lines the gateway and
worker logged meanwhile. All of those must be 0; ``--frames-log`` keeps every frame's outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import random
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import websockets

from omnivox.bench.cluster import cluster, free_port
from omnivox.bench.fuzz_outcomes import Outcomes, tracebacks
from omnivox.bench.table import print_table, write_json
from omnivox.core.keys import bearer

PROTOCOLS = ("streaming", "duplex", "realtime")


SURFACES = ("webrtc_offers", "client_secrets", "recordings", "uploads", "sip", "twilio", "telnyx", "plivo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--frames", type=int, default=2000, help="frames per protocol and surface")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=int, default=100, help="check the server serves this often")
    parser.add_argument("--protocols", nargs="*", default=list(PROTOCOLS), help="WebSocket protocols")
    parser.add_argument(
        "--surfaces",
        nargs="*",
        default=list(SURFACES),
        help="HTTP and phone surfaces: WebRTC offers, client secrets, the recordings API, uploads, SIP "
        "INVITEs, carrier streams",
    )
    parser.add_argument(
        "--keys",
        choices=["off", "on", "both"],
        default="both",
        help="fuzz an open server, a keyed one, or both",
    )
    parser.add_argument("--frames-log", help="write each frame's outcome here (JSON lines)")
    parser.add_argument("--log-dir", help="keep the server logs here (else a temporary folder)")


# ---- the frames


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def _pcm(rng: random.Random, samples: int, dtype: str) -> str:
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
                "messages": [{"role": "user", "content": [{"type": "audio", "data": _b64(rng, 64)}]}],
            },
        ]
    if protocol == "duplex":
        return [
            {"type": "prepare", "system_prompt": "hi", "config": {"chunk_ms": 1000}},
            {"type": "audio_chunk", "audio_base64": _pcm(rng, 1600, "f4")},
            {"type": "audio_chunk", "audio_base64": _pcm(rng, 1600, "i2"), "format": "pcm16"},
            {
                "type": "audio_chunk",
                "audio_base64": _pcm(rng, 160, "f4"),
                "frame_base64_list": [_b64(rng, 32)],
            },
            {"type": "pause", "timeout": 30},
            {"type": "resume"},
            {"type": "client_diagnostic", "metrics": {"x": 1}},
        ]
    return [
        {"type": "session.update", "session": {"type": "realtime", "instructions": "be brief"}},
        {"type": "input_audio_buffer.append", "audio": _pcm(rng, 240, "i2")},
        {"type": "input_audio_buffer.clear"},
        {"type": "input_audio_buffer.commit"},
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": []}},
        {"type": "response.cancel"},
        {"type": "conversation.item.delete", "item_id": "nope"},
    ]


_ODD_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: None,
    lambda r: r.randint(-(10**12), 10**12),
    lambda r: int("9" * r.randint(20, 400)),
    lambda r: r.random() * 1e308,
    lambda r: "x" * r.randint(0, 5000),
    lambda r: "\ud800",
    lambda r: [],
    lambda r: {"nested": {"deeper": [1, 2, {"a": None}]}},
    lambda r: True,
    lambda r: _b64(r, r.randint(0, 300)),
    lambda r: "%%%not base64%%%",
    lambda r: r.choice(["omni", "audio", "", "type", "../../etc/passwd"]),
]


def _mutate(msg: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    msg = json.loads(json.dumps(msg))
    keys = [k for k in msg if k != "type"] or ["extra"]
    for _ in range(rng.randint(1, 3)):
        target = msg
        key = rng.choice(keys)
        if isinstance(target.get(key), dict) and target[key] and rng.random() < 0.5:
            target = target[key]
            key = rng.choice(list(target))
        target[key] = rng.choice(_ODD_VALUES)(rng)
    return msg


def _nested(depth: int) -> str:
    return '{"type": "x", "v": ' + "[" * depth + "]" * depth + "}"


def labelled_frames(protocol: str, seed: int) -> Iterator[tuple[str, str | bytes]]:
    """An endless seeded stream of hostile (and some valid) frames for ``protocol``, each with its
    kind (``valid``, ``mutated``, ``unknown_type``, ``truncated``, ``binary``, ``nested``,
    ``surrogate``, ``scalar``, ``oversized``)."""
    rng = random.Random(f"{protocol}-{seed}")
    valid = valid_messages(protocol, rng)
    while True:
        roll = rng.random()
        if roll < 0.25:
            yield "valid", json.dumps(rng.choice(valid))
        elif roll < 0.55:
            yield "mutated", json.dumps(_mutate(rng.choice(valid), rng))
        elif roll < 0.62:
            kind = rng.choice(["", "fly", "prefill.x", "session.delete", "__proto__"])
            yield "unknown_type", json.dumps({"type": kind})
        elif roll < 0.70:
            text = json.dumps(rng.choice(valid))
            yield "truncated", text[: rng.randint(0, len(text) - 1)]
        elif roll < 0.76:
            yield "binary", rng.randbytes(rng.randint(0, 2000))
        elif roll < 0.82:
            yield "nested", _nested(rng.choice([10, 70, 500, 3000]))
        elif roll < 0.88:
            msg = rng.choice(valid)
            yield (
                "surrogate",
                json.dumps({**msg, "type": msg["type"], "event_id": "\ud800" * rng.randint(1, 3)}),
            )
        elif roll < 0.94:
            yield "scalar", rng.choice(["[]", "null", "42", '"str"', "{}", '{"type": 5}', '{"type": null}'])
        else:
            pad = "y" * rng.randint(10_000, 200_000)
            yield "oversized", json.dumps({"type": rng.choice(valid)["type"], "pad": pad})


def frames(protocol: str, seed: int) -> Iterator[str | bytes]:
    """The frames of ``labelled_frames``, without their kinds."""
    for _, frame in labelled_frames(protocol, seed):
        yield frame


# ---- running it


@dataclass
class FuzzStats:
    frames: int = 0
    errors: int = 0  # frames the server answered with an error
    reconnects: int = 0  # connections the server closed (then reopened)
    checks: int = 0
    failed_checks: list[str] = field(default_factory=list)
    worker_losses: int = 0
    stuck_workers: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Target:
    """The server under fuzz: its addresses, and the keys it wants (None: it wants none)."""

    ws: str
    http: str
    client_key: str | None = None
    admin_key: str | None = None
    sip_port: int | None = None  # where it takes SIP, when it does

    def client(self) -> dict[str, str]:
        return bearer(self.client_key)

    def admin(self) -> dict[str, str]:
        return bearer(self.admin_key)


REACTION_S = 0.04  # how long a frame's reaction is waited for before it counts as silent


def _path(protocol: str, n: int) -> str:
    if protocol == "streaming":
        return f"/ws/streaming/fuzz-{n}"
    if protocol == "duplex":
        return f"/ws/duplex/fuzz-{n}"
    return "/v1/realtime"


def classify(raw: str | bytes) -> str:
    """The outcome a message from the server stands for (``error:CODE`` or ``reply:TYPE``)."""
    try:
        msg = json.loads(raw)
    except (ValueError, TypeError):
        return "reply:binary" if isinstance(raw, bytes) else "reply:text"
    if not isinstance(msg, dict):
        return "reply:other"
    if msg.get("type") == "error":
        error = msg.get("error") if isinstance(msg.get("error"), dict) else msg
        return f"error:{error.get('code')}"
    return f"reply:{msg.get('type') or msg.get('event')}"  # carriers' messages name their ``event``


async def reaction(ws: Any, window: float = REACTION_S) -> str:
    """The server's first reaction to what was just sent: a message, a close, or silence."""
    try:
        raw = await asyncio.wait_for(ws.recv(), window)
    except TimeoutError:
        return "silent"
    except websockets.exceptions.ConnectionClosed as closed:
        return f"closed:{closed.rcvd.code if closed.rcvd else 1006}"
    return classify(raw)


async def settle(ws: Any, window: float = REACTION_S) -> None:
    """Read what the server sends on its own (``session.created``...) until it is quiet."""
    with contextlib.suppress(websockets.exceptions.ConnectionClosed):
        while await reaction(ws, window) != "silent":
            pass


async def _probe(target: Target, protocol: str) -> str | None:
    """One normal exchange of ``protocol``; None if it went as it should, else what went wrong."""
    try:
        async with websockets.connect(
            target.ws + _path(protocol, 0), open_timeout=10, additional_headers=target.client()
        ) as ws:
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


async def _unauthorized(target: Target, protocol: str, outcomes: Outcomes | None) -> None:
    """On a keyed server: a connection with no key and one with a wrong key (each must be refused)."""
    if target.client_key is None:
        return
    for kind, headers in (("no_key", {}), ("wrong_key", bearer("not-the-key"))):
        try:
            async with websockets.connect(
                target.ws + _path(protocol, 1), open_timeout=10, additional_headers=headers
            ) as ws:
                outcome = await reaction(ws, 5.0)
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            outcome = f"refused:{type(exc).__name__}"
        if outcomes is not None:
            outcomes.add(protocol, -1, kind, outcome)


async def fuzz_protocol(
    target: Target | str,
    http: str | None,
    protocol: str,
    n: int,
    seed: int,
    every: int,
    outcomes: Outcomes | None = None,
) -> FuzzStats:
    """``n`` frames in batches of ``every``, each batch on its own connection (reopened when the
    server closes it), and a check after each batch (with the batch's connection closed, so a
    session-scoped fuzz connection does not hold the worker the check needs). Each frame is sent
    once the server has reacted to the one before (or stayed silent ``REACTION_S``)."""
    if isinstance(target, str):
        assert http is not None
        target = Target(target, http)
    stats = FuzzStats()
    began = time.monotonic()
    source = labelled_frames(protocol, seed)
    conn_no = 0
    while stats.frames < n:
        batch_end = min(n, stats.frames + every)
        while stats.frames < batch_end:
            conn_no += 1
            try:
                async with websockets.connect(
                    target.ws + _path(protocol, conn_no), max_size=None, additional_headers=target.client()
                ) as ws:
                    await settle(ws)
                    while stats.frames < batch_end:
                        kind, frame = next(source)
                        await ws.send(frame)
                        outcome = await reaction(ws)
                        stats.frames += 1
                        stats.errors += outcome.startswith("error:")
                        if outcomes is not None:
                            outcomes.add(protocol, stats.frames, kind, outcome)
                        if outcome.startswith("closed:"):
                            break
            except (OSError, websockets.exceptions.WebSocketException):
                pass
            if stats.frames < batch_end:
                stats.reconnects += 1  # the server closed it: reopen
        await _unauthorized(target, protocol, outcomes)
        await _check(target, protocol, stats)
    stats.seconds = time.monotonic() - began
    return stats


async def _check(target: Target, protocol: str, stats: FuzzStats) -> None:
    stats.checks += 1
    problem = await _probe(target, protocol)
    if problem:
        stats.failed_checks.append(problem)
    await check_workers(target, stats)


async def check_workers(target: Target, stats: FuzzStats) -> None:
    """No worker lost or left busy (the admin API's view)."""
    async with httpx.AsyncClient(timeout=5) as client:
        workers = (await client.get(target.http + "/api/workers", headers=target.admin())).json()["workers"]
    stats.worker_losses = sum(1 for w in workers if w["state"] in ("OFFLINE", "ERROR"))
    # a worker busy for longer than any fuzz frame could hold it is stuck
    stats.stuck_workers = sum(1 for w in workers if (w.get("busy_for_s") or 0) > 60)


def run(args: argparse.Namespace) -> int:
    keyings = {"off": [False], "on": [True], "both": [False, True]}[args.keys]
    results: dict[str, Any] = {}
    frames_log = open(args.frames_log, "w") if args.frames_log else None
    bad = False
    try:
        for keyed in keyings:
            label = "keyed" if keyed else "open"
            log_dir = Path(args.log_dir) / label if args.log_dir else Path(tempfile.mkdtemp(prefix="fuzz-"))
            log_dir.mkdir(parents=True, exist_ok=True)
            outcomes = Outcomes(log=frames_log)
            stats = _run_server(args, keyed, log_dir, outcomes)
            traces = tracebacks(log_dir)
            rows = []
            for surface, st in stats.items():
                faults = outcomes.faults(surface)
                bad = bad or bool(faults or st.failed_checks or st.worker_losses or st.stuck_workers)
                row = [surface, st.frames, faults, len(st.failed_checks), st.worker_losses, st.stuck_workers]
                rows.append([*row, outcomes.summary(surface)])
            print_table(
                f"Fuzz, {label} server (seed {args.seed}, cascade worker, a check every {args.check_every})",
                ["surface", "frames", "server faults", "failed checks", "worker losses", "stuck", "outcomes"],
                rows,
            )
            for surface, st in stats.items():
                for problem in st.failed_checks[:5]:
                    print(f"  {surface}: {problem}")
            count = sum(len(t) for t in traces.values())
            print(f"  tracebacks and ERROR lines in the server logs ({log_dir}): {count}")
            for name, ends in traces.items():
                for end in ends[:5]:
                    print(f"    {name}: {end}")
            bad = bad or bool(traces)
            results[label] = {
                "stats": {k: v.__dict__ for k, v in stats.items()},
                "outcomes": outcomes.as_json(),
                "tracebacks": traces,
            }
    finally:
        if frames_log is not None:
            frames_log.close()
    write_json(args.json, {"fuzz": results, "seed": args.seed})
    return 1 if bad else 0


def _run_server(
    args: argparse.Namespace, keyed: bool, log_dir: Path, outcomes: Outcomes
) -> dict[str, FuzzStats]:
    """One server (open, or with keys): every protocol and surface fuzzed."""
    key = secrets.token_hex(16) if keyed else None
    env = fuzz_env(log_dir / "data", key)
    stats: dict[str, FuzzStats] = {}
    with cluster(workers=1, engine="cascade", log_dir=log_dir, **env) as c:
        target = Target(c.ws, c.url, key, key, int(env["OMNIVOX_SIP_PORT"]))
        for surface in [*args.protocols, *args.surfaces]:
            stats[surface] = asyncio.run(
                fuzz_surface(target, surface, args.frames, args.seed, args.check_every, outcomes)
            )
    return stats


def fuzz_env(data_dir: Path, key: str | None) -> dict[str, str]:
    """The fuzzed server: a cascade worker (echo LLM), recording on, SIP on a free port, no
    per-client limits (the fuzzer opens connections fast), and the key when it has one."""
    env = {
        "OMNIVOX_LLM": "echo",
        "OMNIVOX_MAX_SESSIONS_PER_CLIENT": "0",
        "OMNIVOX_CLIENT_CONNECT_RATE": "0",
        "OMNIVOX_SIP_INVITE_RATE": "0",
        "OMNIVOX_SIP_PORT": str(free_port()),
        "OMNIVOX_RECORD_SESSIONS": "true",
        "OMNIVOX_RECORD_MIN_FREE_MB": "0",
        "OMNIVOX_DATA_DIR": str(data_dir),
        "OMNIVOX_WEBRTC_HOST_ADDRESSES": '["127.0.0.1"]',
    }
    if key:
        env["OMNIVOX_API_KEY"] = key
        env["OMNIVOX_SIP_ALLOW"] = '["127.0.0.1/32"]'
    return env


async def fuzz_surface(
    target: Target, surface: str, n: int, seed: int, every: int, outcomes: Outcomes
) -> FuzzStats:
    """Fuzz one protocol or surface by name."""
    from omnivox.bench import fuzz_http, fuzz_phone

    if surface in PROTOCOLS:
        return await fuzz_protocol(target, None, surface, n, seed, every, outcomes)
    if surface in fuzz_http.SURFACES:
        return await fuzz_http.fuzz_http(target, surface, n, seed, every, outcomes)
    return await fuzz_phone.fuzz_phone(target, surface, n, seed, every, outcomes)
