"""The gateway's connection to a worker for one session (or one turn)."""

from __future__ import annotations

import json

import websockets
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from omnivox.connection.sockets import ClientSocket
from omnivox.core.config import Settings
from omnivox.core.keys import bearer
from omnivox.core.tracing import TRACEPARENT, traceparent
from omnivox.protocol.control.internal import GATEWAY_HEADER

# what connecting to a worker that is gone (or was never there) raises
CONNECT_FAILURES = (OSError, InvalidHandshake, InvalidURI, TimeoutError)
REFUSED_STATUS = 409  # the worker's answer to a session it cannot take at once (hosting.py)


class WorkerRefused(Exception):
    """The worker refused the session at its handshake (HTTP 409): no session started on it; the
    assignment was stale (it serves a newer one) or it cannot take one now. ``code``: its reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def trace_headers() -> dict[str, str]:
    """The session's trace, for the worker's spans to join (none when tracing is off)."""
    parent = traceparent()
    return {TRACEPARENT: parent} if parent else {}


def worker_headers(settings: Settings) -> dict[str, str]:
    """What the gateway's requests to workers carry: the worker key, when there is one."""
    return bearer(settings.key_for("worker"))


async def connect_worker(url: str, settings: Settings) -> ClientSocket:
    """Open the WebSocket to a worker; raises ``WorkerRefused`` or one of ``CONNECT_FAILURES``.

    Keepalive pings every ``worker_ping_interval_s``: a worker that hangs (stopped, deadlocked, its
    machine gone) is noticed within interval + timeout and its session gets ``worker_lost``."""
    try:
        conn = await _connect(url, settings)
    except InvalidStatus as exc:
        if exc.response.status_code != REFUSED_STATUS:
            raise
        raise _refusal(exc.response.body) from None
    return ClientSocket(conn)


def _refusal(body: bytes | bytearray | None) -> WorkerRefused:
    try:
        payload = json.loads(body or b"{}")
        return WorkerRefused(str(payload["code"]), str(payload.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return WorkerRefused("worker_busy", "the worker refused the session")


async def _connect(url: str, settings: Settings) -> websockets.ClientConnection:
    return await websockets.connect(
        url,
        max_size=settings.max_message_bytes * 2,
        open_timeout=settings.worker_connect_timeout_s,
        ping_interval=settings.worker_ping_interval_s,
        ping_timeout=settings.worker_ping_timeout_s,
        close_timeout=1.0,  # a worker that does not answer pings will not answer a close either
        max_queue=64,  # frames read ahead of a slow client: back-pressure reaches the worker
        # no per-message deflate on the worker link (websockets offers it by default): base64 audio
        # shrinks by ~40%, but deflating each 40 ms append costs the gateway ~230 us on a busy core
        # (0.6% of a core per session) and each reply delta the worker as much (docs/benchmarks.md)
        compression=None,
        additional_headers={GATEWAY_HEADER: "1", **worker_headers(settings), **trace_headers()},
    )
