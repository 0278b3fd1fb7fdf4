"""The connection guard of a pipeline port: silent connections closed, a cap that keeps the talkers,
and a descriptor closed only when it is this port's connection."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator

import pytest
import zmq

from omnivox.core.config import Settings
from omnivox.pipeline.connections import ConnectionGuard, ConnectionLimits, guard_listener


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def until(condition: Callable[[], bool], guard: ConnectionGuard, timeout: float = 5.0) -> None:
    """Read the guard's monitor until ``condition`` holds (its reports come asynchronously)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the monitor never reported it"
        guard.monitor.poll(50)
        guard.events()


def router(ctx: zmq.Context, **limits) -> tuple[zmq.Socket, ConnectionGuard, str, Clock]:
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    clock = Clock()
    guard = ConnectionGuard(sock, clock=clock, **limits)
    return sock, guard, f"tcp://127.0.0.1:{port}", clock


def dealer(ctx: zmq.Context, address: str) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL, -1)  # closed stays closed
    sock.connect(address)
    return sock


def speak(server: zmq.Socket, guard: ConnectionGuard, peer: zmq.Socket) -> None:
    peer.send(b"hello")
    assert server.poll(5000)
    parts = server.recv_multipart(copy=False)
    guard.heard(int(parts[1].get(zmq.SRCFD)))


def test_a_connection_that_says_nothing_is_closed_and_a_talker_is_kept(ctx):
    server, guard, address, clock = router(ctx, max_connections=10, hello_within_s=2.0)
    talker, _silent = dealer(ctx, address), dealer(ctx, address)
    until(lambda: guard.connections == 2, guard)
    speak(server, guard, talker)
    clock.now = 1.0
    guard.sweep()
    assert guard.connections == 2 and guard.closed == 0  # not yet: it may still greet
    clock.now = 2.5
    guard.sweep()
    assert guard.connections == 1 and guard.closed == 1
    speak(server, guard, talker)  # the talker's connection is still there


def test_past_the_cap_the_oldest_silent_connection_goes_first(ctx):
    server, guard, address, _ = router(ctx, max_connections=3, hello_within_s=None)
    talker = dealer(ctx, address)
    until(lambda: guard.connections == 1, guard)
    speak(server, guard, talker)
    silent = [dealer(ctx, address) for _ in range(2)]
    until(lambda: guard.connections == 3, guard)
    silent.append(dealer(ctx, address))  # a fourth: the oldest silent one is closed, never the talker
    until(lambda: guard.closed == 1, guard)
    assert guard.connections == 3
    speak(server, guard, talker)


def test_when_every_connection_talks_the_newest_is_turned_away(ctx):
    server, guard, address, _ = router(ctx, max_connections=2, hello_within_s=None)
    talkers = [dealer(ctx, address) for _ in range(2)]
    until(lambda: guard.connections == 2, guard)
    for peer in talkers:
        speak(server, guard, peer)
    _late = dealer(ctx, address)
    until(lambda: guard.closed == 1, guard)
    for peer in talkers:
        speak(server, guard, peer)


def test_a_descriptor_that_is_not_this_port_s_connection_is_left_alone(ctx):
    _, guard, _, _ = router(ctx, max_connections=2, hello_within_s=None)
    read, write = os.pipe()
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    try:
        for fd in (read, other.fileno(), 10_000):
            guard._close(fd)
        os.write(write, b"x")
        assert os.read(read, 1) == b"x"  # the pipe still works
        assert other.getsockname()  # the other socket still works
    finally:
        os.close(read)
        os.close(write)
        other.close()


def test_a_handshake_that_never_comes_is_dropped_by_zeromq(ctx):
    server = ctx.socket(zmq.ROUTER)
    server.setsockopt(zmq.LINGER, 0)
    guard_listener(server, 0.3)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    raw = socket.create_connection(("127.0.0.1", port))
    try:
        raw.settimeout(5)
        while raw.recv(1024):  # ZeroMQ's greeting, then the end: it hung up on the silent peer
            pass
    finally:
        raw.close()


def test_limits_come_from_the_settings():
    limits = ConnectionLimits.from_settings(Settings(pipeline_max_connections=9, pipeline_hello_within_s=0.5))
    assert limits == ConnectionLimits(9, 0.5)
