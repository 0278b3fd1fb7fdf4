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
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import websockets

from omnivox.bench import fuzz_http, fuzz_phone
from omnivox.bench.fuzz_frames import (
    ODD_VALUES,
    frames,
    labelled_frames,
    mutate,
    nested_json,
    random_b64,
    random_pcm_b64,
    valid_messages,
)
from omnivox.bench.fuzz_outcomes import Outcomes, tracebacks
from omnivox.bench.fuzz_target import (
    REACTION_S,
    FuzzStats,
    Target,
    check_serving,
    check_workers,
    classify,
    reaction,
    session_path,
    settle,
)
from omnivox.bench.table import print_table, write_json
from omnivox.core.keys import bearer
from omnivox.testing.cluster import cluster, free_port

PROTOCOLS = ("streaming", "duplex", "realtime")
# (the frames and the shared pieces live in fuzz_frames and fuzz_target; named here as well, since
# this module is what ``omnivox bench fuzz`` and its tests see)
__all__ = [
    "ODD_VALUES",
    "PROTOCOLS",
    "REACTION_S",
    "SURFACES",
    "FuzzStats",
    "Target",
    "check_serving",
    "check_workers",
    "classify",
    "frames",
    "fuzz_env",
    "fuzz_protocol",
    "fuzz_surface",
    "labelled_frames",
    "mutate",
    "nested_json",
    "random_b64",
    "random_pcm_b64",
    "reaction",
    "run",
    "session_path",
    "settle",
    "valid_messages",
]


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


# ---- running it


async def _unauthorized(target: Target, protocol: str, outcomes: Outcomes | None) -> None:
    """On a keyed server: a connection with no key and one with a wrong key (each must be refused)."""
    if target.client_key is None:
        return
    for kind, headers in (("no_key", {}), ("wrong_key", bearer("not-the-key"))):
        try:
            async with websockets.connect(
                target.ws + session_path(protocol, 1), open_timeout=10, additional_headers=headers
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
                    target.ws + session_path(protocol, conn_no),
                    max_size=None,
                    additional_headers=target.client(),
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
        await check_serving(target, protocol, stats)
    stats.seconds = time.monotonic() - began
    return stats


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
    with cluster(workers=1, engine="cascade", log_dir=log_dir, env=env) as c:
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
    if surface in PROTOCOLS:
        return await fuzz_protocol(target, None, surface, n, seed, every, outcomes)
    if surface in fuzz_http.SURFACES:
        return await fuzz_http.fuzz_http(target, surface, n, seed, every, outcomes)
    return await fuzz_phone.fuzz_phone(target, surface, n, seed, every, outcomes)
