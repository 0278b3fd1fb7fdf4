"""ZeroMQ plumbing shared by the coordinator, stages and clients: sockets and multipart messages.

A message on the wire is one header frame (``messages.encode``) followed by the payload's array
frames (``relay``). Sends never block: messages for a peer that is (re)connecting queue up to
``HWM``; past that a send is ``zmq.Again``, which callers turn into data (``RelayFull``) or drop
(heartbeats). Sockets linger for nothing on close, so a process never hangs on exit waiting for a
dead peer.

Keys. With the worker key set (``worker_key`` or ``api_key``), every pipeline socket speaks
CurveZMQ with a key pair derived from it (``curve_keys``): whoever does not hold the key cannot
complete a handshake with the coordinator or a stage, so cannot register a stage, submit, or read
what flows (frames between hosts are encrypted too). Without a key, the coordinator and stages
listen on loopback only, unless told ``--public`` (as the gateway does).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import zmq
import zmq.utils.z85

from omnivox.core.errors import BadPipelineMessage, RelayFull
from omnivox.pipeline.messages import Message, decode, encode

log = logging.getLogger(__name__)

HWM = 10_000  # messages queued per peer before sends fail (RelayFull)
_COPY_BELOW = 64 * 1024  # smaller frames are copied (cheaper than tracking a zero-copy buffer)


@dataclass(frozen=True)
class CurveKeys:
    """The pipeline's CurveZMQ key pair (Z85), the same for every process that holds the key."""

    public: bytes
    secret: bytes

    def __repr__(self) -> str:  # never the secret in a log
        return "CurveKeys(***)"


def curve_keys(key: str | None) -> CurveKeys | None:
    """The key pair derived from the worker key (None without one)."""
    if not key:
        return None
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq has no CURVE security: the pipeline cannot use its key")
    secret = zmq.utils.z85.encode(hashlib.sha256(b"omnivox-pipeline\0" + key.encode()).digest())
    return CurveKeys(zmq.curve_public(secret), secret)


def socket(
    ctx: zmq.Context[Any],
    kind: int,
    *,
    identity: bytes | None = None,
    curve: CurveKeys | None = None,
    server: bool = False,
) -> zmq.Socket[Any]:
    """A socket with the pipeline's options; with ``curve``, a CurveZMQ ``server`` (one that binds)
    or client (one that connects) holding the pipeline's keys."""
    sock = ctx.socket(kind)
    if curve is not None:
        sock.curve_secretkey = curve.secret
        sock.curve_publickey = curve.public
        if server:
            sock.curve_server = True
        else:
            sock.curve_serverkey = curve.public
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, HWM)
    sock.setsockopt(zmq.RCVHWM, HWM)
    if kind == zmq.ROUTER:
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # an unknown peer is an error, not a silent drop
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    return sock


def bind(sock: zmq.Socket[Any], host: str, port: int = 0) -> str:
    """Bind on ``host:port`` (0: a free port) and return the ``tcp://`` address."""
    if port:
        sock.bind(f"tcp://{host}:{port}")
        return f"tcp://{host}:{port}"
    port = sock.bind_to_random_port(f"tcp://{host}")
    return f"tcp://{host}:{port}"


def send(
    sock: zmq.Socket[Any], message: Message, frames: Sequence[Any] = (), *, to: bytes | None = None
) -> None:
    """Send without blocking; ``RelayFull`` when the peer cannot take it now (gone or full)."""
    parts: list[Any] = [] if to is None else [to]
    parts.append(encode(message))
    parts.extend(frames)
    try:
        for i, part in enumerate(parts):
            more = zmq.SNDMORE if i < len(parts) - 1 else 0
            size = part.nbytes if hasattr(part, "nbytes") else len(part)
            sock.send(part, flags=zmq.NOBLOCK | more, copy=size < _COPY_BELOW)
    except zmq.Again:
        raise RelayFull("the next hop cannot take the message (its queue is full, or it is gone)") from None
    except zmq.ZMQError as exc:
        if exc.errno == zmq.EHOSTUNREACH:  # ROUTER_MANDATORY: that peer is not connected
            raise RelayFull("the peer is not connected") from None
        raise


@dataclass(frozen=True)
class Received:
    identity: bytes | None  # the sender's socket identity (routed sockets)
    message: Message | None  # None: it did not decode (and was dropped)
    frames: list[Any]  # the payload frames after the header
    fd: int  # the connection it came on, to match disconnections; -1 if unknown


def readable(sock: zmq.Socket[Any]) -> bool:
    """Whether a message waits on ``sock`` now (ZMQ_EVENTS is an int option; pyzmq types every
    option's value as int or bytes)."""
    return bool(cast(int, sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN)


def receive(sock: zmq.Socket[Any], *, routed: bool = False) -> Received:
    """One message. Never raises for what a peer sent."""
    parts = sock.recv_multipart(copy=False)
    identity: bytes | None = None
    fd = -1
    if routed:
        identity = parts[0].bytes
        parts = parts[1:]
    if parts:
        with contextlib.suppress(zmq.ZMQError):
            fd = int(parts[0].get(zmq.SRCFD))
    if not parts:
        return Received(identity, None, [], fd)
    try:
        message = decode(parts[0].buffer)
    except BadPipelineMessage as err:
        log.warning("dropped a malformed control message: %s", err.message)
        return Received(identity, None, parts[1:], fd)
    return Received(identity, message, parts[1:], fd)
