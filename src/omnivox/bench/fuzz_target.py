"""What every fuzzer shares: the server under fuzz, a run's counts, how the server's reaction to a
frame is read, and the check that it still serves (a normal session, no worker lost or stuck)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets

from omnivox.core.keys import bearer


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


def session_path(protocol: str, n: int) -> str:
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
        nested = msg.get("error")
        error = nested if isinstance(nested, dict) else msg
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
    """Read what the server sends on its own (``session.created``...) until it is quiet or closed.

    ``reaction`` turns a close into ``closed:CODE``, and a closed socket answers every read with
    its close again: reading on would spin for ever (a server refusing the connection)."""
    while (outcome := await reaction(ws, window)) != "silent" and not outcome.startswith("closed:"):
        pass


async def _probe(target: Target, protocol: str) -> str | None:
    """One normal exchange of ``protocol``; None if it went as it should, else what went wrong."""
    try:
        async with websockets.connect(
            target.ws + session_path(protocol, 0), open_timeout=10, additional_headers=target.client()
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


async def check_serving(target: Target, protocol: str, stats: FuzzStats) -> None:
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
