"""The connections one listening pipeline port holds, bounded (the coordinator's, each stage's).

ZeroMQ accepts every TCP connection and keeps it for as long as the peer does; nothing in it caps
how many a port holds, and its API cannot close one peer's connection. Idle connections cost an
open file each, and a process out of them cannot take its stages' and workers' connections. So:

- a TCP connection that has not finished ZeroMQ's handshake within ``hello_within_s`` is dropped
  by ZeroMQ itself (``HANDSHAKE_IVL``, set by ``guard_listener`` before the bind); with the worker
  key, that includes every peer without it (CurveZMQ);
- where every peer greets at once (the coordinator: stages register, clients say hello, both on
  every heartbeat), a connection that has said nothing within ``hello_within_s`` is closed;
- past ``max_connections``, the oldest connection that has said nothing is closed (the newest
  when every one has spoken), so a port full of silent connections still takes a peer that talks.

A connection is closed by shutting its socket down through a duplicate of its descriptor (which
the monitor reports on accept): ZeroMQ then sees the peer gone and closes it itself, as if the
peer had hung up. Before that, the descriptor is checked to be a connected TCP socket on this
port, so a descriptor reused since the monitor's report is never another file's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from omnivox.core.config import Settings


@dataclass(frozen=True)
class ConnectionLimits:
    """What one pipeline port holds (``pipeline_max_connections``, ``pipeline_hello_within_s``)."""

    max_connections: int = 128  # stages and workers together need far fewer
    hello_within_s: float = 5.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(settings.pipeline_max_connections, settings.pipeline_hello_within_s)


def guard_listener(sock: zmq.Socket[Any], hello_within_s: float) -> None:
    """Options of a socket that binds: unfinished handshakes are dropped after ``hello_within_s``."""
    sock.setsockopt(zmq.HANDSHAKE_IVL, max(1, int(hello_within_s * 1000)))


class ConnectionGuard:
    """Watches one bound socket's connections through its monitor and closes the ones too many.

    ``hello_within_s`` None: silence is no fault on this port (a stage's PULL: its peers push only
    when they have work), only the cap applies. Not thread-safe: call it from the socket's loop."""

    def __init__(
        self,
        sock: zmq.Socket[Any],
        *,
        max_connections: int,
        hello_within_s: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sock = sock
        self.monitor = sock.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._port = int(endpoint.rsplit(":", 1)[1])
        self.max_connections = max_connections
        self.hello_within_s = hello_within_s
        self._clock = clock
        self._open: dict[int, float] = {}  # connection (fd) -> when it was accepted, oldest first
        self._heard: set[int] = set()  # connections a message came on
        self._gone: list[int] = []  # closed since the owner last asked
        self.closed = 0  # connections closed here (silent, or past the cap)

    @property
    def connections(self) -> int:
        return len(self._open)

    def events(self) -> list[int]:
        """Take the monitor's reports; returns the connections that closed since (their fds)."""
        self._read()
        gone, self._gone = self._gone, []
        return gone

    def heard(self, fd: int) -> None:
        """A message came on connection ``fd``."""
        if fd not in self._open:
            self._read()  # its message came before the monitor's report of it was read
        if fd in self._open:
            self._heard.add(fd)

    def _read(self) -> None:
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)
            fd = int(event["value"])
            if event["event"] == zmq.EVENT_ACCEPTED:
                self._open[fd] = self._clock()
                self._heard.discard(fd)
                if len(self._open) > self.max_connections:
                    self._close(self._evictee())
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self._open.pop(fd, None)
                self._heard.discard(fd)
                self._gone.append(fd)

    def sweep(self, now: float | None = None) -> None:
        """Close the connections silent for longer than ``hello_within_s``."""
        if self.hello_within_s is None:
            return
        now = self._clock() if now is None else now
        for fd, accepted in list(self._open.items()):
            if fd not in self._heard and now - accepted > self.hello_within_s:
                self._close(fd)

    def close(self) -> None:
        with contextlib.suppress(zmq.ZMQError):
            self._sock.disable_monitor()
        self.monitor.close(0)

    def _evictee(self) -> int:
        silent = [fd for fd in self._open if fd not in self._heard]
        return silent[0] if silent else next(reversed(self._open))

    def _close(self, fd: int) -> None:
        self._open.pop(fd, None)  # its disconnection is reported later; it no longer counts
        self._heard.discard(fd)
        self.closed += 1
        try:
            dup = socket.socket(fileno=os.dup(fd))
        except OSError:
            return  # closed meanwhile (or never a socket)
        with dup:
            try:
                tcp = dup.family in (socket.AF_INET, socket.AF_INET6) and dup.type == socket.SOCK_STREAM
                ours = tcp and dup.getsockname()[1] == self._port
                dup.getpeername()  # a connection, not the listening socket itself
            except OSError:
                return
            if ours:
                with contextlib.suppress(OSError):
                    dup.shutdown(socket.SHUT_RDWR)
