"""The gateway's connection to a worker for one session (or one turn)."""

from __future__ import annotations

import websockets
from websockets.exceptions import InvalidHandshake, InvalidURI

from omnivox.connection.sockets import ClientSocket
from omnivox.core.config import Settings
from omnivox.core.keys import bearer
from omnivox.core.tracing import TRACEPARENT, traceparent
from omnivox.protocol.control.internal import GATEWAY_HEADER

# what connecting to a worker that is gone (or was never there) raises
CONNECT_FAILURES = (OSError, InvalidHandshake, InvalidURI, TimeoutError)


def trace_headers() -> dict[str, str]:
    """The session's trace, for the worker's spans to join (none when tracing is off)."""
    parent = traceparent()
    return {TRACEPARENT: parent} if parent else {}


def worker_headers(settings: Settings) -> dict[str, str]:
    """What the gateway's requests to workers carry: the worker key, when there is one."""
    return bearer(settings.key_for("worker"))


async def connect_worker(url: str, settings: Settings) -> ClientSocket:
    """Open the WebSocket to a worker; raises one of ``CONNECT_FAILURES``.

    Keepalive pings every ``worker_ping_interval_s``: a worker that hangs (stopped, deadlocked, its
    machine gone) is noticed within interval + timeout and its session gets ``worker_lost``."""
    conn = await websockets.connect(
        url,
        max_size=settings.max_message_bytes * 2,
        open_timeout=settings.worker_connect_timeout_s,
        ping_interval=settings.worker_ping_interval_s,
        ping_timeout=settings.worker_ping_timeout_s,
        close_timeout=1.0,  # a worker that does not answer pings will not answer a close either
        max_queue=64,  # frames read ahead of a slow client: back-pressure reaches the worker
        additional_headers={GATEWAY_HEADER: "1", **worker_headers(settings), **trace_headers()},
    )
    return ClientSocket(conn)
