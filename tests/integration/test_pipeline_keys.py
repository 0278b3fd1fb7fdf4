"""The pipeline's keys, on real processes (as the gateway's, issue 11): with the worker key, the
coordinator and its stages speak CurveZMQ and only the key's holders get in; without one, they
listen on loopback only unless told --public."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import zmq

from cluster import free_port
from omnivox.core.errors import OmnivoxError
from omnivox.pipeline import transport
from omnivox.pipeline.client import PipelineClient
from omnivox.pipeline.messages import Hello
from pipeline_processes import omnivox, stop, through

KEY = "pipeline-secret"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[str]:
    """``omnivox coordinator --pipeline noop`` with the key (its local stages inherit it)."""
    port = free_port()
    log = tmp_path_factory.mktemp("keys") / "coordinator.log"
    proc = omnivox(
        "coordinator", "--pipeline", "noop", "--port", str(port), env={"OMNIVOX_WORKER_KEY": KEY}, log=log
    )
    address = f"tcp://127.0.0.1:{port}"
    client = PipelineClient(address, key=KEY)
    try:
        deadline = time.monotonic() + 60
        while not (client.ready.is_set() and {"a", "b", "c"} <= set(client.stages)):
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        yield address
    finally:
        client.close()
        stop(proc)


def test_the_key_holders_get_through(keyed) -> None:
    client = PipelineClient(keyed, key=KEY, name="holder")
    try:
        assert client.wait_ready(10)
        assert through(client) == {"n": 7}
    finally:
        client.close()


@pytest.mark.parametrize("key", [None, "not-the-key"])
def test_without_the_key_a_client_never_gets_in(keyed, key) -> None:
    client = PipelineClient(keyed, key=key, name="outsider")
    try:
        assert not client.wait_ready(2)  # its handshake never completes: no Welcome
        with pytest.raises(OmnivoxError) as refused:
            client.submit({"n": 1})
        assert refused.value.code == "stage_unavailable"
    finally:
        client.close()
    # nor does a plain ZeroMQ peer, whatever it sends
    sock = transport.socket(zmq.Context.instance(), zmq.DEALER)
    try:
        sock.connect(keyed)
        transport.send(sock, Hello("rogue"))
        assert sock.poll(1500) == 0
    finally:
        sock.close(0)


def test_a_stage_without_the_key_cannot_take_a_stage_s_place(keyed, tmp_path) -> None:
    holder = PipelineClient(keyed, key=KEY, name="watcher")
    try:
        assert holder.wait_ready(10)
        real = holder.stages["a"].pid
        log = tmp_path / "rogue.log"
        rogue = omnivox(
            "stage",
            "a",
            "--pipeline",
            "noop",
            "--coordinator",
            keyed,
            env={"OMNIVOX_WORKER_KEY": "nope"},
            log=log,
        )
        try:
            deadline = time.monotonic() + 60
            while "stage a ready" not in log.read_text():
                assert time.monotonic() < deadline and rogue.poll() is None, log.read_text()
                time.sleep(0.05)
            time.sleep(2)  # twenty of its heartbeats: none reaches the coordinator
            assert holder.stages["a"].pid == real
            assert through(holder) == {"n": 7}
        finally:
            stop(rogue)
    finally:
        holder.close()


def test_without_a_key_nothing_listens_beyond_loopback_unless_public() -> None:
    port = str(free_port())
    for args in (
        ["coordinator", "--pipeline", "noop", "--host", "0.0.0.0", "--port", port],
        ["stage", "a", "--pipeline", "noop", "--coordinator", "tcp://127.0.0.1:9", "--host", "0.0.0.0"],
    ):
        refused = subprocess.run(
            [sys.executable, "-m", "omnivox", *args],
            env={k: v for k, v in os.environ.items() if not k.endswith("_KEY")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0 and "refusing to listen on 0.0.0.0 without a key" in refused.stderr
    public = omnivox("coordinator", "--pipeline", "noop", "--host", "0.0.0.0", "--port", port, "--public")
    client = PipelineClient(f"tcp://127.0.0.1:{port}", name="anyone")
    try:
        assert client.wait_ready(60)  # told so, it listens there, open to all
    finally:
        client.close()
        stop(public)
