"""Idle connections to the pipeline's ports, on real processes (issue 25, finding 11): 200 idle
connections to the coordinator took its open files from 23 to 223, for good. Now connections that
never finish ZeroMQ's handshake, or that say nothing to the coordinator, are closed; a port holds
at most ``pipeline_max_connections``; and the pipeline serves throughout."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest
import zmq

from cluster import free_port
from omnivox.pipeline.client import PipelineClient
from pipeline_processes import omnivox, stop, through

CAP = 24
HELLO_S = 1.0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def settles(pid: int, at_most: int, within_s: float = 20.0) -> int:
    deadline = time.monotonic() + within_s
    while (count := open_files(pid)) > at_most and time.monotonic() < deadline:
        time.sleep(0.2)
    return count


@pytest.fixture
def pipeline(tmp_path) -> Iterator[tuple[int, str, PipelineClient]]:
    port = free_port()
    env = {"OMNIVOX_PIPELINE_MAX_CONNECTIONS": str(CAP), "OMNIVOX_PIPELINE_HELLO_WITHIN_S": str(HELLO_S)}
    log = tmp_path / "coordinator.log"
    proc = omnivox("coordinator", "--pipeline", "noop", "--port", str(port), env=env, log=log)
    address = f"tcp://127.0.0.1:{port}"
    client = PipelineClient(address, name="watcher")
    try:
        deadline = time.monotonic() + 60
        while not (client.ready.is_set() and {"a", "b", "c"} <= set(client.stages)):
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        yield proc.pid, address, client
    finally:
        client.close()
        stop(proc)


def flood(
    address: str, kind: int, n: int, reconnect: bool = True
) -> tuple[list[socket.socket], list[zmq.Socket]]:
    """``n`` plain TCP connections that never speak, and ``n`` ZeroMQ peers that never send (which
    come back at once when closed, unless ``reconnect`` is off)."""
    host, port = address.removeprefix("tcp://").split(":")
    raw = [socket.create_connection((host, int(port))) for _ in range(n)]
    ctx = zmq.Context.instance()
    peers = []
    for _ in range(n):
        sock = ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        if not reconnect:
            sock.setsockopt(zmq.RECONNECT_IVL, -1)
        sock.connect(address)
        peers.append(sock)
    return raw, peers


def close(raw: list[socket.socket], peers: list[zmq.Socket]) -> None:
    for s in raw:
        s.close()
    for p in peers:
        p.close(0)


def test_silent_connections_to_the_coordinator_are_closed(pipeline):
    pid, address, client = pipeline
    before = open_files(pid)
    held = flood(address, zmq.DEALER, 100, reconnect=False)
    try:
        # still open on this side, gone on the coordinator's: closed for saying nothing
        assert settles(pid, before + 4) <= before + 4
        assert through(client) == {"n": 7}
    finally:
        close(*held)


def test_a_stage_s_port_holds_at_most_its_cap(pipeline):
    """A stage's peers push only when they have work (silence is no fault there): the cap bounds
    what idle connections hold."""
    _, _, client = pipeline
    stage = client.stages["b"]
    before = open_files(stage.pid)
    held = flood(stage.address, zmq.PUSH, 100, reconnect=False)
    try:
        assert settles(stage.pid, before + CAP + 4) <= before + CAP + 4
        assert through(client) == {"n": 7}  # its own peers still reach it
    finally:
        close(*held)
    assert settles(stage.pid, before + 4) <= before + 4


def test_the_pipeline_serves_while_silent_peers_keep_coming_back(pipeline):
    """Peers that reconnect as soon as they are closed cannot keep a talking one out: the oldest
    silent connection goes first."""
    pid, address, client = pipeline
    stage = client.stages["b"]
    before = open_files(pid)
    held = [flood(address, zmq.DEALER, 60), flood(stage.address, zmq.PUSH, 60)]
    try:
        time.sleep(1.0)
        for n in range(3):
            newcomer = PipelineClient(address, name=f"newcomer-{n}")
            try:
                assert newcomer.wait_ready(10) and through(newcomer) == {"n": 7}
            finally:
                newcomer.close()
        assert through(client) == {"n": 7}
    finally:
        for h in held:
            close(*h)
    assert settles(pid, before + 4) <= before + 4
